"""The explorer in a real browser: headless Chromium driven by Playwright.

Each test acts as a user does (a slider moved with the keyboard, a click on a
plot or a button) and reads the result back from the page's Bokeh document
(``Bokeh.documents[0]``), where the server's changes arrive.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.slow

DOC = "Bokeh.documents[0].get_model_by_name"
LOAD = 180_000  # ms: a loaded machine builds the page slowly
STEP = 120_000


def data(page: Any, name: str, column: str) -> list[Any]:
    return page.evaluate(f"() => Array.from({DOC}('{name}').data['{column}'])")


@pytest.fixture(scope="module")
def page(browser: Any, explore_url: str) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.external = []
    page.on("request", lambda r: page.external.append(r.url)
            if r.url.startswith(("http:", "https:")) and not r.url.startswith(explore_url)
            else None)
    page.goto(explore_url, timeout=LOAD)
    page.locator(".regression-plot").first.wait_for(timeout=LOAD)
    page.wait_for_function(f"() => {DOC}('regression-fit').data['fit'].length > 0",
                           timeout=LOAD)
    yield page
    page.close()


def _open_tab(page: Any, title: str) -> None:
    page.get_by_text(title, exact=True).first.click()


def test_page_uses_no_external_resources(page: Any, explore_url: str) -> None:
    sources = page.evaluate("() => Array.from(document.querySelectorAll('script[src], "
                            "link[href]'), e => e.src || e.href)")
    assert sources and all(s.startswith(explore_url) for s in sources), sources
    assert page.external == []


def test_regression_slider_and_click(page: Any) -> None:
    before = data(page, "regression-fit", "fit")
    handle = page.locator(".noUi-handle").first
    handle.focus()
    for _ in range(25):
        page.keyboard.press("ArrowRight")
    page.wait_for_function(f"(f) => {DOC}('regression-fit').data['fit'][10] != f",
                           arg=before[10], timeout=STEP)
    mark = page.evaluate(f"() => {DOC}('regression-cv-mark').location")
    assert mark > 0
    box = page.locator(".regression-plot").first.bounding_box()
    page.locator(".regression-plot").first.click(
        position={"x": box["width"] * 0.45, "y": box["height"] * 0.5})
    # the bars and the mark are two changes; the page may show one before the other
    page.wait_for_function(f"() => {DOC}('regression-weights').data['w'].length > 0"
                           f" && {DOC}('regression-query').visible", timeout=STEP)
    weights = data(page, "regression-weights", "w")
    assert sum(weights) == pytest.approx(1.0, abs=1e-9)


def test_attention_token_and_kernel(page: Any) -> None:
    _open_tab(page, "Attention")
    page.wait_for_function(f"() => {DOC}('attention-map').data['w'].length > 0",
                           timeout=LOAD)
    softmax = data(page, "attention-map", "w")
    n = round(len(softmax) ** 0.5)
    plot = page.locator(".attention-map").first
    box = plot.bounding_box()
    plot.click(position={"x": box["width"] * 0.5, "y": box["height"] * 0.5})
    page.wait_for_function(f"() => {DOC}('attention-row').data['w'].length > 0",
                           timeout=STEP)
    assert len(data(page, "attention-row", "w")) == n
    page.get_by_role("button", name="rbf").first.click()
    page.wait_for_function(f"(w) => {DOC}('attention-map').data['w'][1] != w",
                           arg=softmax[1], timeout=STEP)
    rbf = data(page, "attention-map", "w")
    for i in range(n):
        assert sum(rbf[i * n:(i + 1) * n]) == pytest.approx(1.0, abs=1e-5)


def test_images_pixel_kernel(page: Any) -> None:
    _open_tab(page, "Images")
    page.wait_for_function(f"() => {DOC}('images-noisy').data['image'].length > 0",
                           timeout=LOAD)
    plot = page.locator(".images-noisy").first
    box = plot.bounding_box()
    plot.click(position={"x": box["width"] * 0.5, "y": box["height"] * 0.55})
    page.wait_for_function(f"() => {DOC}('images-kernel').data['image'].length > 0",
                           timeout=STEP)
    assert page.evaluate(f"() => {DOC}('images-kernel').data['dw'][0]") >= 3
    assert page.get_by_text("PSNR before").count() >= 1


def test_scale_reports_engine(page: Any) -> None:
    _open_tab(page, "Scale")
    page.get_by_text("Engine:").first.wait_for(timeout=LOAD)
    assert page.get_by_text("Time in").count() >= 1


def test_regression_csv_upload(page: Any, tmp_path: Any) -> None:
    _open_tab(page, "Regression")
    csv = tmp_path / "points.csv"
    csv.write_text("dose,response\n" + "".join(f"{i},{(i % 7) ** 2}\n" for i in range(40)))
    page.locator("input[type=file]").first.set_input_files(str(csv))
    page.wait_for_function(f"() => {DOC}('regression-data').data['x'].length == 40",
                           timeout=STEP)
    page.wait_for_function(f"() => {DOC}('regression-fit').data['x'][0] == 0", timeout=STEP)
    assert max(data(page, "regression-data", "y")) == 36
