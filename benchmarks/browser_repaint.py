"""How fast a slider move repaints in the real browser: JupyterLab on 127.0.0.1, headless Debian Chromium driven by
Playwright (the recipe of tests/browser/conftest.py), an Explorer on the slowest chapter case.

    OMP_NUM_THREADS=1 python benchmarks/browser_repaint.py [--moves 10]

A scratch notebook (in a temporary folder) shows tw.Explorer("chapter-7.2-longtail", policy="dynamic",
batch_size=32); after run-all and "| Idle", a key press moves a slider and we time, in the page, from the
keydown event to the end of the frame that paints the figures' change (a MutationObserver on the plotly
figures; ARM_JS says how). Moves alternate right/left, so every knob move re-runs the engine (no cache). Two
sliders: the batch-size knob (kernel round trip: dry run + redraw + the figure's update message) and the step
cursor (kernel round trip: every view's cursor). Prints a Markdown table: median and max ms of the first change
painted and of the whole update painted.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))

import conftest as recipe  # noqa: E402  the browser tests' JupyterLab + Chromium recipe

CELLS = ["import tinyserve_widgets as tw\n"
         "ex = tw.Explorer('chapter-7.2-longtail', policy='dynamic', batch_size=32)\nex"]

# Arms a one-shot timer: a keydown (anywhere: document, capture phase) starts it; a MutationObserver on the plotly
# figures notes every change after that, and for each one times the end of the frame that paints it (an animation
# frame callback, then a task posted from it: the task runs once that frame is painted). window.__repaint: the
# first change painted; window.__settled: the last one (the whole update on screen). Watching mutations costs the
# page nothing between them (an earlier version serialized the figures' SVG every frame, which slowed the page
# it timed by ~30 ms a move).
ARM_JS = """() => {
  if (window.__obs) window.__obs.disconnect();
  window.__repaint = null;
  window.__settled = null;
  let t0 = null;
  const painted = () => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => {
      const done = performance.now() - t0;
      if (window.__repaint === null) window.__repaint = done;
      window.__settled = done;
    };
    ch.port2.postMessage(0);
  };
  const obs = new MutationObserver(() => { if (t0 !== null) requestAnimationFrame(painted); });
  document.querySelectorAll('.jp-OutputArea-output .js-plotly-plot').forEach(
    p => obs.observe(p, {subtree: true, childList: true, attributes: true, characterData: true}));
  window.__obs = obs;
  document.addEventListener('keydown', () => { t0 = performance.now(); }, {once: true, capture: true});
  return true;
}"""

SLIDERS_JS = """() => [...document.querySelectorAll('.jp-OutputArea-output .widget-slider')].map(
  s => (s.querySelector('.widget-label') || {}).textContent || '')"""


def _notebook(path: Path) -> None:
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c} for c in CELLS]
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                          "language": "python"}},
                                "nbformat": 4, "nbformat_minor": 5}))


def _wait(page, js: str, timeout: float, what: str, arg=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = page.evaluate(js, arg)
        if v:
            return v
        time.sleep(0.1)
    raise TimeoutError(f"waiting for {what}")


class _Factory:
    """The one method of pytest's tmp_path_factory that recipe.lab uses."""

    def __init__(self, tmp: Path):
        self.tmp = tmp

    def mktemp(self, name: str) -> Path:
        d = self.tmp / name
        d.mkdir()
        return d


def measure(page, slider: int, moves: int) -> list[tuple[float, float]]:
    """(first, last) ms from keydown to a painted change of the figures, for `moves` alternate right/left presses
    of slider i."""
    handle = page.locator(".jp-OutputArea-output .widget-slider .noUi-handle").nth(slider)
    handle.scroll_into_view_if_needed()
    out = []
    for m in range(moves + 1):  # the first move warms up (not counted)
        page.evaluate(ARM_JS)
        handle.focus()
        handle.press("ArrowRight" if m % 2 == 0 else "ArrowLeft")
        ms = _wait(page, "() => window.__repaint", 30, f"the figure to repaint (slider {slider}, move {m})")
        _wait(page, "() => ((document.querySelector('#jp-main-statusbar') || {}).textContent || '').includes('| Idle')",
              30, "the kernel to be idle")
        time.sleep(0.3)  # let trailing messages settle before the next move
        if m:
            out.append((ms, page.evaluate("() => window.__settled")))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=10, help="moves per slider (median and max reported)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        nb = tmp / "repaint.ipynb"
        _notebook(nb)
        # the browser tests' own fixture, called as a plain generator: it copies chapters/ and widgets/ into a
        # scratch root with its own Jupyter config and serves it; our notebook goes into that root's widgets/
        lab_gen = recipe.lab.__wrapped__(_Factory(tmp))
        url = next(lab_gen)
        root = next(tmp.glob("lab*/root"))
        (root / "widgets" / "repaint.ipynb").write_text(nb.read_text())
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=recipe.CHROMIUM, args=recipe.CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"{url}/lab/workspaces/repaint/tree/widgets/repaint.ipynb?reset", timeout=120_000)
                status = "() => ((document.querySelector('#jp-main-statusbar') || {}).textContent || '').includes('| Idle')"
                _wait(page, status, 180, "the kernel to be idle")
                page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
                _wait(page, "() => document.querySelectorAll('.jp-OutputArea-output .js-plotly-plot svg.main-svg')"
                      ".length > 0", 300, "the explorer's figure")
                _wait(page, status, 120, "run-all to finish")
                time.sleep(2)
                labels = page.evaluate(SLIDERS_JS)
                rows = []
                for name in ("batch size", "step"):  # the knob, and the cursor
                    i = next((k for k, lbl in enumerate(labels) if lbl.strip().lower() == name), None)
                    if i is None:
                        print(f"no slider labelled {name!r} among {labels}", file=sys.stderr)
                        continue
                    ms = measure(page, i, args.moves)
                    first, last = [m[0] for m in ms], [m[1] for m in ms]
                    rows.append((labels[i].strip(), len(ms), statistics.median(first), max(first),
                                 statistics.median(last), max(last)))
                browser.close()
        finally:
            next(lab_gen, None)
    print("| slider | moves | first change painted: median ms | max ms | whole update painted: median ms | max ms |\n"
          "|---|---:|---:|---:|---:|---:|")
    for label, n, med, mx, med2, mx2 in rows:
        print(f"| {label} | {n} | {med:.0f} | {mx:.0f} | {med2:.0f} | {mx2:.0f} |")


if __name__ == "__main__":
    main()
