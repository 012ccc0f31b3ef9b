"""A pytest plugin for the notebook runs: a cell whose figure drew a glyph its font lacks fails.

Matplotlib draws a character no font in its list has as an empty box and only warns ("Glyph 20301 (...)
missing from font(s) DejaVu Sans."); nbval --nbval-lax would pass such a cell. chapters/conftest.py loads
this hook, so every notebook of both editions, run under nbval, fails on that warning instead; the browser pages,
which run the chapter notebooks in the full run, call missing_glyphs on every cell (tests/browser/nbval_lax.py).
"""
from __future__ import annotations

import pytest

MISSING = "missing from font"


def missing_glyphs(outputs) -> list[str]:
    """The warning lines about missing glyphs in a cell's outputs (stream text and plain-text results)."""
    lines = []
    for out in outputs or []:
        text = out.get("text", "") if out.get("output_type") == "stream" else \
            (out.get("data") or {}).get("text/plain", "")
        text = "".join(text) if isinstance(text, list) else str(text)
        lines += [ln.strip() for ln in text.splitlines() if MISSING in ln]
    return lines


def glyph_failure(lines: list[str]) -> str:
    """The failure's words for a cell whose outputs have missing-glyph lines (nbval's and the browser pages')."""
    return f"a figure drew characters its font lacks (install fonts-noto-cjk, see tinyserve.lang.fonts): {lines[:3]}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Turn a passing nbval cell into a failure when its outputs say a glyph was missing."""
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed:
        return
    lines = missing_glyphs(getattr(item, "test_outputs", None))
    if lines:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: {glyph_failure(lines)}"
