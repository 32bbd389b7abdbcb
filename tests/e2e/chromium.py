"""The real browser of the end-to-end tests: Debian's headless Chromium driven by Selenium
through Debian's chromedriver, with a fresh profile and nothing that phones home. A test
that needs it skips, saying what to install, when either is missing."""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1000",
)


def chromium(profile: Path, *args: str) -> Any:
    """A new browser on the profile directory `profile`; its console is kept (`console()`)."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip(
            "needs Debian's chromium and chromium-driver (.ci/run installs them: apt-get install chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (*ARGS, f"--user-data-dir={profile}", *args):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def console(driver: Any) -> str:
    """What the page wrote to the console since the last call (CSP violations land here)."""
    return "\n".join(f"{e['level']}: {e['message']}" for e in driver.get_log("browser"))


def trusting(ca_pem: bytes, leaf_pems: list[bytes], home: Path) -> list[str]:
    """Chromium's arguments to trust a test CA. On Linux Chromium takes the trust anchors a
    user added from the NSS database in `$HOME/.pki/nssdb` (HOME is the test's own), so with
    certutil (Debian's libnss3-tools) the CA is trusted as a real one would be and no argument
    is needed. Without certutil: the test certificates' keys alone
    (`--ignore-certificate-errors-spki-list`, honoured with `--user-data-dir`), never every
    certificate as `--ignore-certificate-errors` would."""
    certutil = shutil.which("certutil")
    if certutil:
        db = home / ".pki" / "nssdb"
        db.mkdir(parents=True, exist_ok=True)
        ca = home / "test-ca.pem"
        ca.write_bytes(ca_pem)
        for args in (["-N", "--empty-password"], ["-A", "-t", "C,,", "-n", "mp-engine test CA", "-i", str(ca)]):
            subprocess.run([certutil, "-d", f"sql:{db}", *args], check=True, capture_output=True, timeout=30)
        return []
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    def pin(pem: bytes) -> str:
        key = x509.load_pem_x509_certificate(pem).public_key()
        spki = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        return base64.b64encode(hashlib.sha256(spki).digest()).decode()

    return ["--ignore-certificate-errors-spki-list=" + ",".join(pin(p) for p in leaf_pems)]


def until(driver: Any, condition: Any, what: str, timeout: float = 30) -> Any:
    """Wait for `condition(driver)` with a deadline; fail saying where the browser is and what
    its console said (a CSP violation leaves the page where it was, silently)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout).until(condition)
    except TimeoutException:
        raise AssertionError(
            f"the browser never showed {what} within {timeout:g} s: it is on {driver.current_url}; console:\n"
            f"{console(driver)}"
        ) from None
