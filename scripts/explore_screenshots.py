"""Screenshots of each tab of ``nadaraya explore`` for the documentation.

Starts the explorer on a free port, opens it in headless Chromium (Playwright
with the system browser), acts on each tab as a reader would (a slider moved,
a point, a token and a pixel clicked) and writes
``docs/_static/explore/<tab>.png``.

Run: ``PYTHONPATH=src python scripts/explore_screenshots.py [--out DIR]``
(needs ``apt-get install chromium`` and the Python packages panel and playwright).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = "Bokeh.documents[0].get_model_by_name"
WAIT = 300_000


def _click(page, selector: str, fx: float, fy: float) -> None:
    plot = page.locator(selector).first
    box = plot.bounding_box()
    plot.click(position={"x": box["width"] * fx, "y": box["height"] * fy})


def shoot(url: str, out: Path, chromium: str) -> None:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1050})
        page.goto(url, timeout=WAIT)
        page.locator(".noUi-handle").first.wait_for(timeout=WAIT)
        page.wait_for_function(f"() => {DOC}('regression-fit').data['fit'].length > 0",
                               timeout=WAIT)
        page.locator(".noUi-handle").first.focus()
        for _ in range(15):
            page.keyboard.press("ArrowRight")
        _click(page, ".regression-plot", 0.45, 0.5)
        page.wait_for_function(f"() => {DOC}('regression-weights').data['w'].length > 0",
                               timeout=WAIT)
        time.sleep(2)
        page.screenshot(path=str(out / "regression.png"), full_page=True)

        page.get_by_text("Attention", exact=True).first.click()
        page.wait_for_function(f"() => {DOC}('attention-map').data['w'].length > 0",
                               timeout=WAIT)
        _click(page, ".attention-map", 0.5, 0.3)
        page.wait_for_function(f"() => {DOC}('attention-row').data['w'].length > 0",
                               timeout=WAIT)
        time.sleep(2)
        page.screenshot(path=str(out / "attention.png"), full_page=True)

        page.get_by_text("Images", exact=True).first.click()
        page.wait_for_function(f"() => {DOC}('images-noisy').data['image'].length > 0",
                               timeout=WAIT)
        _click(page, ".images-noisy", 0.32, 0.35)
        page.wait_for_function(f"() => {DOC}('images-kernel').data['image'].length > 0",
                               timeout=WAIT)
        time.sleep(2)
        page.screenshot(path=str(out / "images.png"), full_page=True)

        page.get_by_text("Scale", exact=True).first.click()
        page.get_by_text("Engine:").first.wait_for(timeout=WAIT)
        time.sleep(1)
        page.screenshot(path=str(out / "scale.png"), full_page=True)
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "_static" / "explore")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no Chromium found; install it with apt-get install chromium", file=sys.stderr)
        return 1
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    server = subprocess.Popen([sys.executable, "-m", "nadaraya", "explore", "--port", str(port),
                               "--no-browser"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        shoot(f"http://127.0.0.1:{port}/", args.out, chromium)
    finally:
        server.terminate()
        server.wait(timeout=30)
    for png in sorted(args.out.glob("*.png")):
        print(f"wrote {png.relative_to(ROOT) if png.is_relative_to(ROOT) else png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
