"""A headless Chromium (Debian's chromium and chromium-driver, nothing downloaded) for the console
tests: one browser for the module; skipped only outside CI when it is not installed."""
from __future__ import annotations

import os
import pathlib
import shutil

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = pathlib.Path(__file__).parent / "screenshots"


def _have_browser() -> str | None:
    """Why the browser cannot run here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(path) or shutil.which(os.path.basename(path))):
            return f"{path} is not installed (Debian: apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (the 'test' extra)"
    return None


@pytest.fixture(scope="module")
def browser():
    missing = _have_browser()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"console browser tests cannot run in CI: {missing}")
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--disable-extensions"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER if os.path.exists(CHROMEDRIVER)
                                              else shutil.which("chromedriver")), options=opts)
    driver.set_page_load_timeout(60)
    SCREENSHOTS.mkdir(exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()

