"""What a learner sees of the answers after Run All: every cell tagged reveal (chapters/build.py) shows the hint
and nothing of its answer until a prediction is in; then, once the prediction is typed, the answers that wait on
it (the question's key on their output), with no cell run again, and still after the question's cell or Run All
runs again. Read from the page as drawn (innerText: a closed <details> shows its summary only), not from a file."""
from __future__ import annotations

import re

from tinyserve.lang import t

# every reveal cell of the open notebook: the text its outputs show on screen, pictures or widgets outside a
# closed <details>, and how many <details> are closed or open
REVEAL_JS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .map((c, i) => ({c, i}))
  .filter(({c}) => c.model.type === 'code' && (c.model.getMetadata('tags') || []).includes('reveal'))
  .map(({c, i}) => {
    const outs = c.outputArea ? [...c.outputArea.node.querySelectorAll('.jp-OutputArea-output')] : [];
    const shown = e => !e.closest('details:not([open])') && e.getClientRects().length > 0;
    const answer = outs.map(o => o.querySelector('.tinyserve-answer')).find(a => a);
    return {cell: i, text: outs.map(o => o.innerText).join('\\n'), count: c.model.executionCount,
            key: answer ? answer.dataset.question : null,
            media: outs.flatMap(o => [...o.querySelectorAll('img, svg, canvas, .js-plotly-plot, .jupyter-widgets')])
                       .filter(shown).length,
            closed: outs.reduce((n, o) => n + o.querySelectorAll('details:not([open])').length, 0),
            open: outs.reduce((n, o) => n + o.querySelectorAll('details[open]').length, 0)};
  })"""


def allowed_lines() -> set[str]:
    """What a reveal cell may show before a prediction, in either language: the hint and the closed summary.

    Read with t(key, lang), not by switching tinyserve's language: a switch relabels every live view of this
    process (tinyserve_widgets.views), and in the full run the worker still holds every widget the unit tests
    made (ipywidgets keeps them), so each switch cost seconds, and this is called for every reveal cell while a
    page is polled (most of a browser-stage worker's CPU, 2026-12-06)."""
    keys = ("predict.hint", "predict.hint_choice", "predict.summary")
    return {t(key, lang) for lang in ("en", "zh-TW") for key in keys}


def before_prediction(cells: list[dict]) -> list[str]:
    """What gives an answer away after Run All with no prediction typed: any line but the hint and the closed
    summary, a digit, a picture or widget on screen, an answer not kept closed (one <details>, not open)."""
    allowed, problems = allowed_lines(), []
    for c in cells:
        lines = [ln.strip() for ln in c["text"].splitlines() if ln.strip()]
        extra = [ln for ln in lines if ln not in allowed]
        if extra or re.search(r"\d", c["text"]) or c["media"] or c["closed"] != 1 or c["open"]:
            problems.append(f"reveal cell {c['cell']} shows its answer before a prediction: "
                            f"{extra[:2] or c['text'][:80]!r}, {c['media']} pictures on screen, "
                            f"{c['closed']} closed and {c['open']} open <details>")
    return problems


def after_prediction(cell: dict, guess: str) -> list[str]:
    """A reveal cell once the prediction is in: the comparison and the answer on screen, nothing closed."""
    said = {"You said " + guess, "你預測 " + guess}
    if cell["closed"] or any(h in cell["text"] for h in allowed_lines()) or not any(s in cell["text"] for s in said) \
            or len(re.findall(r"\d", cell["text"])) < 2:
        return [f"reveal cell {cell['cell']} after the prediction {guess!r} does not show the answer: "
                f"{cell['text'][:160]!r}, {cell['closed']} closed <details>"]
    return []


def opened(cell: dict) -> list[str]:
    """A reveal cell that waits on a question once its prediction is in: its answer on screen (text or a picture),
    nothing closed, no hint. (Only a cell that calls reveal() prints the comparison: after_prediction.)"""
    if cell["closed"] or any(h in cell["text"] for h in allowed_lines()) or not (cell["text"].strip() or cell["media"]):
        return [f"reveal cell {cell['cell']} after the prediction does not show its answer: {cell['text'][:160]!r}, "
                f"{cell['media']} pictures on screen, {cell['closed']} closed <details>"]
    return []
