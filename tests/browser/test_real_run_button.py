"""Every chapter explorer's real-run button works at the settings the explorer opens with: in real JupyterLab in
headless Chromium, run the notebook, press "run on the real model" (用真的模型跑一次) without touching a knob, and
the real run finishes (the explorer's status line says so) with no refusal or error message in the widget.

The zh-TW edition by default (both editions with BROWSER_REAL_RUN_BOTH=1: the explorers are the same code). All
explorers run in the one JupyterLab session of conftest.lab; a notebook's kernel is shut down before the next.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from .test_notebooks_in_browser import STATE_JS, _shutdown_kernels, _wait

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser

RUN_TIMEOUT_S = 600  # the notebook itself (<= 60 s on 2 quiet cores; a shared machine can be much slower)
REAL_TIMEOUT_S = 180  # the real run: a few seconds on a laptop's CPU

# the button's label and the status line's "finished" words, per edition (widgets.pot: explorer.real*)
WORDS = {"zh-TW": ("用真的模型跑一次", "真實執行完成"), "en": ("Run on the real model", "Real run finished")}


def notebooks_with_an_explorer() -> list[str]:
    """The chapter notebooks whose source builds a tw.Explorer with its real-run button (7.1-7.4 today)."""
    out = []
    for src in sorted((ROOT / "chapters" / "src").glob("7.*.py")):
        text = src.read_text()
        if "tw.Explorer(" not in text or re.search(r"Explorer\([^#]*?real_button=False", text):
            continue
        editions = ["zh-TW/"] + ([""] if os.environ.get("BROWSER_REAL_RUN_BOTH") else [])
        out += [f"chapters/{e}{src.stem}.ipynb" for e in editions if (ROOT / "chapters" / f"{e}{src.stem}.ipynb").exists()]
    return out


# the explorer's own text: its message box (refusals, errors) and its status line, read from the output that holds
# the real-run button
EXPLORER_JS = """(label) => {
  const b = [...document.querySelectorAll('.jp-OutputArea-output button')].find(e => e.textContent.trim() === label);
  if (!b) return null;
  const out = b.closest('.jp-OutputArea-output');
  const msg = [...out.querySelectorAll('.tinyserve-message')].map(e => e.textContent).join(' | ');
  return {text: out.innerText, message: msg, disabled: b.disabled};
}"""


def test_notebooks_have_an_explorer_to_press():
    assert len(notebooks_with_an_explorer()) >= 4, notebooks_with_an_explorer()


@pytest.mark.parametrize("notebook", notebooks_with_an_explorer())
def test_real_run_button_works_at_the_opening_settings(notebook, lab, browser, screens_dir):
    lang = "zh-TW" if "/zh-TW/" in notebook else "en"
    label, finished = WORDS[lang]
    name = "real-run__" + notebook.replace("/", "__").removesuffix(".ipynb")

    def shot(page, tag: str = "") -> str:
        path = screens_dir / f"{name}{'-' + tag if tag else ''}.png"
        page.screenshot(path=str(path), full_page=True)
        return str(path)

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    state = lambda: page.evaluate(STATE_JS, notebook)  # noqa: E731
    try:
        workspace = re.sub(r"[^A-Za-z0-9-]", "-", name)
        page.goto(f"{lab}/lab/workspaces/{workspace}/tree/{notebook}?reset", timeout=120_000)
        _wait(lambda: state()["ready"] and "| Idle" in state()["status"], 180, "the kernel to be idle", page, shot)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs'); }")
        _wait(lambda: (lambda s: s["pending"] == s["code"])(state()), 60, "outputs to clear", page, shot)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        _wait(lambda: (lambda s: s["running"] or s["pending"] < s["code"])(state()), 60, "run-all to start", page, shot)

        def finished_all():
            s = state()
            return s if (s["errors"] or not s["pending"]) and not s["running"] and "| Idle" in s["status"] else None

        s = _wait(finished_all, RUN_TIMEOUT_S, "every cell to run", page, shot)
        assert not s["errors"], f"{s['errors']} (screenshot: {shot(page, 'FAILED')})"
        _wait(lambda: page.evaluate(EXPLORER_JS, label), 30, f"the button {label!r}", page, shot)
        before = page.evaluate(EXPLORER_JS, label)
        assert not before["message"], before["message"]  # the explorer opened without a complaint
        button = page.locator(".jp-OutputArea-output button", has_text=label).first
        button.scroll_into_view_if_needed()
        t0 = time.monotonic()
        button.click()  # no knob touched

        def settled():
            e = page.evaluate(EXPLORER_JS, label)
            return e if e and (finished in e["text"] or e["message"]) and not e["disabled"] else None

        e = _wait(settled, REAL_TIMEOUT_S, "the real run to finish or be refused", page, shot)
        if e["message"] or finished not in e["text"]:
            pytest.fail(f"{notebook}: the real run at the opening settings did not finish: {e['message']!r} "
                        f"(screenshot: {shot(page, 'FAILED')})")
        assert not state()["errors"]
        print(f"{notebook}: real run finished in {time.monotonic() - t0:.1f} s (button to status line)")
        shot(page)
    finally:
        context.close()
        _shutdown_kernels(lab)
