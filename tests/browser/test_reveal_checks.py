"""The browser test's reading of reveal cells (reveal.py), on what a page could hand back: no browser needed."""
from __future__ import annotations

import pytest

from .reveal import after_prediction, before_prediction

HINT = "Enter your prediction in the box above, then run this cell again."
SUMMARY = "The engine's answer (open it once you have predicted)"
HINT_ZH = "先在上面的框裡輸入你的預測，再執行一次這個儲存格。"
SUMMARY_ZH = "引擎的答案（預測之後再打開）"


def cell(text, media=0, closed=1, opened=0):
    return {"cell": 5, "text": text, "media": media, "closed": closed, "open": opened, "count": 7}


@pytest.mark.parametrize("text", [f"{HINT}\n{SUMMARY}", f"{HINT_ZH}\n\n{SUMMARY_ZH}"])
def test_the_hint_and_a_closed_answer_pass(text):
    assert before_prediction([cell(text)]) == []


@pytest.mark.parametrize("shown", [
    cell(f"{HINT}\n{SUMMARY}\nshort prompt: 50 tokens, 4000 computed"),  # a line of the answer on screen
    cell(f"{HINT} 31"),  # a number beside the hint
    cell(f"{HINT}\n{SUMMARY}", media=1),  # a figure outside the closed part
    cell(f"{HINT}\n{SUMMARY}", closed=0),  # no closed answer at all
    cell(f"{HINT}\n{SUMMARY}", closed=0, opened=1),  # drawn open
    cell("You said 3; the engine says 1: 200% off high.", closed=0),  # the old behaviour on Run All
])
def test_anything_of_the_answer_on_screen_fails(shown):
    assert len(before_prediction([cell(f"{HINT}\n{SUMMARY}"), shown])) == 1


def test_after_a_prediction_the_comparison_and_the_numbers_must_be_on_screen():
    assert after_prediction(cell("You said 1 token; the engine says 3,950 tokens: far off low.\n3950 padding",
                                 closed=0), "1") == []
    assert after_prediction(cell("你預測 1 token，引擎算出 3,950 token：偏低。", closed=0), "1") == []
    assert after_prediction(cell(f"{HINT}\n{SUMMARY}"), "1")  # still hidden
    assert after_prediction(cell("the engine says 3,950 tokens", closed=0), "1")  # the prediction not beside it


def test_an_answer_open_after_a_prediction_shows_text_or_a_picture_and_nothing_closed():
    from .reveal import opened

    assert opened(cell("", media=1, closed=0)) == []  # a figure alone, drawn open
    assert opened(cell("3950 padding", closed=0)) == []
    assert opened(cell("", closed=0))  # nothing at all
    assert opened(cell(f"{HINT}\n{SUMMARY}"))  # still closed
    assert opened(cell(HINT, media=1, closed=0))  # the hint left beside it
