"""Fixtures for the front-end tests: a real headless Chromium driven by selenium through
/usr/bin/chromedriver.

Browser tests fail (never skip) when Chromium is missing: ``make test`` installs it first with
``scripts/install_browser.sh``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_helpers import ARTIFACTS

CHROMIUM = os.environ.get("SOLARIAN_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SOLARIAN_CHROMEDRIVER", "/usr/bin/chromedriver")


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def browser() -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        pytest.fail(f"headless Chromium is needed for browser tests; missing {missing}: run "
                    "scripts/install_browser.sh (make test does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="solarian-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
              "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
              "--window-size=1440,1000", f"--user-data-dir={profile}"):
        opts.add_argument(a)
    service = Service(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(service=service, options=opts)
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(10)
    try:
        yield driver
    finally:
        try:
            driver.quit()
        finally:
            shutil.rmtree(profile, ignore_errors=True)
