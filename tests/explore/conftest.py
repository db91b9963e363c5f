"""A headless Chromium for the browser tests, and an explorer server on a free port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
MISSING = ("no Chromium found for the browser tests; install it with apt-get install chromium "
           "(Debian's chromium package)")


def find_chromium() -> str | None:
    """The system Chromium; installed with apt-get when missing, as root, under CI=true."""
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    if os.environ.get("CI") == "true" and hasattr(os, "geteuid") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "chromium"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900)
        return shutil.which("chromium")
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def explore_url() -> Iterator[str]:
    """URL of ``nadaraya explore`` running in a subprocess (stopped after the session)."""
    pytest.importorskip("panel")
    port = _free_port()
    src = Path(__file__).resolve().parents[2] / "src"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(src), *filter(None, [os.environ.get("PYTHONPATH")])]))
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, "-m", "nadaraya", "explore", "--port", str(port),
                             "--no-browser"], env=env, stdout=log, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.5)
    else:
        proc.kill()
        log.seek(0)
        output = log.read()
        pytest.fail(f"the explorer server did not start: {output}")
    yield f"http://127.0.0.1:{port}/"
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Playwright's Chromium driver on the system browser (``--no-sandbox`` as root)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    path = find_chromium()
    if path is None:
        pytest.skip(MISSING)
    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, args=args)
        yield chromium
        chromium.close()
