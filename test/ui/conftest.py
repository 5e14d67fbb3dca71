"""Fixtures for the front-end tests: a real headless Chromium driven by selenium through
/usr/bin/chromedriver.

Browser tests fail (never skip) when Chromium is missing: ``make test`` installs it first with
``scripts/install_browser.sh``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_helpers import ARTIFACTS, quit_chromium, start_chromium


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def browser() -> Iterator[Any]:
    driver, profile = start_chromium()
    try:
        yield driver
    finally:
        quit_chromium(driver, profile)


@pytest.fixture
def browser_factory() -> Iterator[Callable[..., Any]]:
    """Start more browsers (each its own Chromium and profile: separate viewers), with extra
    command-line flags; all are closed at the end."""
    started: list[tuple[Any, str]] = []

    def start(*extra_args: str) -> Any:
        started.append(start_chromium(tuple(extra_args)))
        return started[-1][0]

    try:
        yield start
    finally:
        for driver, profile in started:
            quit_chromium(driver, profile)
