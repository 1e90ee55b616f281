"""Neo4j Browser, served by the local server on non-default ports, connects in a real headless
Chromium: the address it offers comes from the server's advertised addresses, and logging in works.
A screenshot of the connected Browser is saved and its path printed."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import require

pytestmark = pytest.mark.neo4j

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def _chromium(tmp_path: Path):  # type: ignore[no-untyped-def]
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # The machine's network is closed: no background connections, no component updates.
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,900", f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def test_browser_connects_on_the_advertised_ports(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    http_port = os.environ.get("GRAPHMEM_NEO4J_HTTP_PORT")
    bolt_port = os.environ.get("GRAPHMEM_NEO4J_BOLT_PORT")
    require(http_port is not None and bolt_port is not None,
            "scripts/test starts the local server and exports its ports")
    require(shutil.which(CHROMIUM) is not None and shutil.which(CHROMEDRIVER) is not None,
            "Debian's chromium and chromium-driver are installed (.ci/run installs them)")
    assert {http_port, bolt_port}.isdisjoint({"7474", "7687"}), "the test is about non-default ports"

    driver = _chromium(tmp_path)
    shot = tmp_path / "neo4j-browser-connected.png"
    try:
        driver.get(f"http://127.0.0.1:{http_port}/browser/")
        wait = WebDriverWait(driver, 90)
        address = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, 'input[data-testid="boltaddress"]')))
        # Browser fills the form from the server's discovery document: the advertised Bolt port.
        wait.until(lambda _: address.get_attribute("value"))
        assert address.get_attribute("value").endswith(f":{bolt_port}"), address.get_attribute("value")
        # The form is in the page before it takes input (a loaded machine showed "not interactable").
        user = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, 'input[data-testid="username"]')))
        user.clear()
        user.send_keys(os.environ.get("NEO4J_USERNAME", "neo4j"))
        driver.find_element(By.CSS_SELECTOR, 'input[data-testid="password"]').send_keys(
            os.environ.get("NEO4J_PASSWORD", ""))
        # Browser probes the server without credentials as it loads; the server answers failed
        # logins with a short lock (AuthenticationRateLimit), so a refused attempt is repeated.
        text = ""
        for _attempt in range(4):
            driver.find_element(By.CSS_SELECTOR, 'button[data-testid="connect"]').click()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                text = driver.find_element(By.TAG_NAME, "body").text
                if "You are connected as user" in text or "AuthenticationRateLimit" in text:
                    break
                time.sleep(0.5)
            if "You are connected as user" in text:
                break
            time.sleep(6)
        assert "You are connected as user" in text, text[-2000:]
        assert f"127.0.0.1:{bolt_port}" in text or f"localhost:{bolt_port}" in text, text[-2000:]
    finally:
        driver.save_screenshot(str(shot))
        driver.quit()
    assert shot.stat().st_size > 10_000
    print(f"screenshot of the connected Neo4j Browser: {shot}")
