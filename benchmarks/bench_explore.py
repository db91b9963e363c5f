"""How fast the explorer's fit follows the bandwidth slider at n = 1e4.

Times the callback a slider move runs (``RegressionTab.set_bandwidth``:
``nadaraya.smooth`` of 1e4 points at the 200 x values of the drawn fit, the
CV mark and the data sent to the plot) against the same fit computed by a
dense NumPy formula and by statsmodels' ``KernelReg``, as ratios; then, with
``--browser``, the round trip in headless Chromium (Playwright): a key press
on the slider until the new fit reaches the page's Bokeh document, on a
server given the same 1e4 points as an uploaded CSV.

Run: ``PYTHONPATH=src python benchmarks/bench_explore.py [--browser] [--repeat R]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N = 10_000


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def callback(repeat: int) -> None:
    from nadaraya.explore.regression import RegressionTab
    from nadaraya.explore.scale import generate

    x, y = generate(N)
    tab = RegressionTab()
    tab.set_data(x[:, 0], y, bandwidth=0.2)
    values = iter(np.geomspace(0.05, 1.0, 10 * repeat))
    ours = best(lambda: tab.set_bandwidth(next(values)), repeat)
    grid, xs = tab.grid, x[:, 0]

    def dense() -> np.ndarray:
        w = np.exp(-0.5 * ((grid[:, None] - xs[None, :]) / 0.2) ** 2)
        return (w @ y) / w.sum(axis=1)

    rows = [("explore callback (nadaraya.smooth)", ours),
            ("numpy dense formula", best(dense, repeat))]
    try:
        from statsmodels.nonparametric.kernel_regression import KernelReg

        model = KernelReg(y, xs, "c", reg_type="lc", bw=[0.2])
        rows.append(("statsmodels KernelReg.fit", best(lambda: model.fit(grid), 1)))
    except ImportError:
        pass
    print(f"fit update at n = {N}, {grid.size} x values, best of {repeat}:")
    for name, seconds in rows:
        print(f"  {name:<38} {seconds * 1e3:9.1f} ms   ratio to ours {seconds / ours:6.2f}")


def browser_round_trip(repeat: int) -> None:
    from playwright.sync_api import sync_playwright

    from nadaraya.explore.scale import generate

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("browser round trip skipped: no Chromium (apt-get install chromium)")
        return
    x, y = generate(N)
    folder = Path(tempfile.mkdtemp())
    csv = folder / "points.csv"
    np.savetxt(csv, np.column_stack([x[:, 0], y]), delimiter=",", header="x,y", comments="")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    server = subprocess.Popen([sys.executable, "-m", "nadaraya", "explore", "--port", str(port),
                               "--no-browser"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    doc = "Bokeh.documents[0].get_model_by_name"
    try:
        time.sleep(5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/", timeout=300_000)
            page.locator(".noUi-handle").first.wait_for(timeout=300_000)
            page.locator("input[type=file]").first.set_input_files(str(csv))
            page.wait_for_function(f"() => {doc}('regression-data').data['x'].length == {N}",
                                   timeout=600_000)
            page.evaluate(f"""() => {{ const s = {doc}('regression-fit');
                s.properties.data.change.connect(() => {{ window.t1 = performance.now(); }}); }}""")
            times = []
            for _ in range(repeat):
                page.evaluate("() => { window.t1 = 0; }")
                page.locator(".noUi-handle").first.focus()
                t0 = page.evaluate("() => performance.now()")
                page.keyboard.press("ArrowRight")
                page.wait_for_function("() => window.t1 > 0", timeout=60_000)
                times.append(page.evaluate("() => window.t1") - t0)
            browser.close()
        print(f"browser round trip (key press to new fit in the page) at n = {N}: "
              f"best {min(times):.1f} ms, median {np.median(times):.1f} ms of {repeat}")
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--browser", action="store_true", help="also the round trip in Chromium")
    args = parser.parse_args()
    callback(args.repeat)
    if args.browser:
        browser_round_trip(args.repeat)


if __name__ == "__main__":
    main()
