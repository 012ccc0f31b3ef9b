"""7.3's deployment explorer alone in real JupyterLab and headless Chromium, in both editions (issue 52, item 3):
built from the chapter's own call (chapter_calls: its source's statements), in a scratch notebook, run, then
checked as a learner meets it: no choice control blank, the axis on a window where the arrows stand apart,
hovering an arrow names its request, and a move of the time cursor repaints within REPAINT_MS (timed in the page,
from the key press to the painted change: the recipe of benchmarks/browser_repaint.py). Screenshots go to the
screenshots folder (deployment-explorer-<lang>.png)."""
from __future__ import annotations

import json
import os
import time
import warnings
import urllib.request
from pathlib import Path

import pytest

from chapter_calls import explorer_calls

from .test_notebooks_in_browser import BLANK_CHOICES_JS, _check_the_hand_off, _wait

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "chapters" / "src" / "7.3-chunked-prefill.py"
REPAINT_MS = 500  # the browser's slider -> repaint budget (benchmarks/README.md, browser_repaint.py)

# one-shot timer: a keydown starts it; the end of the frame that paints the first change of a plotly figure stops it
ARM_JS = """() => {
  if (window.__obs) window.__obs.disconnect();
  window.__repaint = null;
  let t0 = null;
  const painted = () => { const ch = new MessageChannel();
    ch.port1.onmessage = () => { if (window.__repaint === null) window.__repaint = performance.now() - t0; };
    ch.port2.postMessage(0); };
  const obs = new MutationObserver(() => { if (t0 !== null) requestAnimationFrame(painted); });
  document.querySelectorAll('.jp-OutputArea-output .js-plotly-plot').forEach(
    p => obs.observe(p, {subtree: true, childList: true, attributes: true, characterData: true}));
  window.__obs = obs;
  document.addEventListener('keydown', () => { t0 = performance.now(); }, {once: true, capture: true});
  return true;
}"""
IDLE_JS = "() => ((document.querySelector('#jp-main-statusbar') || {}).textContent || '').includes('| Idle')"


def _notebook(lang: str) -> dict:
    (program, call), = [c for c in explorer_calls(SOURCE) if "DeploymentExplorer" in c[1]]
    cells = [f"import tinyserve\ntinyserve.set_language({lang!r})\n{program}", call]
    return {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
                      for c in cells],
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_the_deployment_explorer_as_a_learner_meets_it(lab, browser, screens_dir, lang):
    name = f"deployment-explorer-{lang}"
    body = json.dumps({"type": "notebook", "content": _notebook(lang)}).encode()
    for path in ("scratch", f"scratch/{name}.ipynb"):
        data = json.dumps({"type": "directory"}).encode() if path == "scratch" else body
        req = urllib.request.Request(f"{lab}/api/contents/{path}", data=data, method="PUT",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()

    def shot(page, tag: str = "") -> str:
        path = screens_dir / f"{name}{'-' + tag if tag else ''}.png"
        page.screenshot(path=str(path), full_page=True)
        return str(path)

    try:
        page.goto(f"{lab}/lab/workspaces/{name}/tree/scratch/{name}.ipynb?reset", timeout=120_000)
        _wait(lambda: page.evaluate(IDLE_JS), 180, "the kernel to be idle", page, shot)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        _wait(lambda: page.evaluate("() => !!document.querySelector('.jp-OutputArea-output .rangeslider-container')"),
              300, "the deployment figure", page, shot)
        _wait(lambda: page.evaluate(IDLE_JS), 120, "run-all to finish", page, shot)
        time.sleep(1)
        assert "Error displaying widget" not in page.inner_text("body")
        blank = page.evaluate(BLANK_CHOICES_JS)
        assert not blank, f"choice controls showing no value: {blank} (screenshot: {shot(page, 'FAILED')})"
        _check_the_hand_off(page, name, shot)
        shot(page)
        # the time cursor (the first slider of the view: its FloatSlider) moved by a key: painted within budget
        handle = page.locator(".jp-OutputArea-output .widget-hslider .noUi-handle").last
        handle.scroll_into_view_if_needed()
        times = []
        for m in range(4):  # the first move warms up
            page.evaluate(ARM_JS)
            handle.focus()
            handle.press("ArrowRight" if m % 2 == 0 else "ArrowLeft")
            ms = _wait(lambda: page.evaluate("() => window.__repaint"), 30, "the cursor's repaint", page, shot)
            _wait(lambda: page.evaluate(IDLE_JS), 30, "the kernel to be idle", page, shot)
            time.sleep(0.3)
            times.append(ms)
        print(f"{lang}: cursor move -> painted, ms: {[round(t) for t in times]}")
        # the budget holds on a quiet machine (benchmarks/README.md); on one whose load exceeds its cores, a
        # paint's time stretches with the load, so there the times are reported, not judged
        quiet = os.getloadavg()[0] < (os.cpu_count() or 1)
        if quiet:
            assert sorted(times[1:])[1] < REPAINT_MS, times  # the median of three moves
        else:
            warnings.warn(f"{lang}: load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: cursor repaint "
                          f"{[round(t) for t in times]} ms not judged against {REPAINT_MS} ms")
    finally:
        context.close()
