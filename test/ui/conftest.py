"""Fixtures for the front-end tests: a real headless Chromium driven by selenium through
/usr/bin/chromedriver.

Browser tests fail (never skip) when Chromium is missing: ``make test`` installs it first with
``scripts/install_browser.sh``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
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


def _start_chromium(extra_args: tuple[str, ...] = ()) -> tuple[Any, str]:
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
              "--window-size=1440,1000", f"--user-data-dir={profile}", *extra_args):
        opts.add_argument(a)
    service = Service(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(service=service, options=opts)
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(10)
    return driver, profile


def _quit(driver: Any, profile: str) -> None:
    try:
        driver.quit()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser() -> Iterator[Any]:
    driver, profile = _start_chromium()
    try:
        yield driver
    finally:
        _quit(driver, profile)


@pytest.fixture
def browser_factory() -> Iterator[Callable[..., Any]]:
    """Start more browsers (each its own Chromium and profile: separate viewers), with extra
    command-line flags; all are closed at the end."""
    started: list[tuple[Any, str]] = []

    def start(*extra_args: str) -> Any:
        started.append(_start_chromium(tuple(extra_args)))
        return started[-1][0]

    try:
        yield start
    finally:
        for driver, profile in started:
            _quit(driver, profile)
