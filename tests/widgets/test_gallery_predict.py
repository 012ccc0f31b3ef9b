"""Predict-then-reveal (tinyserve_widgets.predict): numbers only, the reason in the widget otherwise, both
numbers side by side after reveal, and a text fallback where no kernel runs."""
import math
import re

import pytest

from tinyserve_widgets.predict import Choose, Predict, compare, parse_number


@pytest.mark.parametrize("text,value", [("1980", 1980.0), ("1,980", 1980.0), (" 2e3 ", 2000.0), ("-4.5", -4.5),
                                        ("1_000", 1000.0), ("+7", 7.0), ("0.25", 0.25)])
def test_numbers_people_type_are_read(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("text,reason", [("", "Type a number first"), ("   ", "Type a number first"),
                                         ("abc", "“abc” is not a number"), ("12 tokens", "is not a number"),
                                         ("nan", "not a finite number"), ("inf", "not a finite number"),
                                         ("1e400", "not a finite number"), ("0x10", "is not a number")])
def test_anything_else_is_refused_with_the_reason(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_number(text)


def test_bad_input_says_why_in_the_widget_and_keeps_the_previous_prediction():
    p = Predict("How many tokens will slot 7 waste?", unit="tokens")
    assert p.submit("1,900") and p.guess == 1900.0
    p.box.value = "lots"  # typing in the box (Enter) goes through the same check
    assert p.guess == 1900.0
    assert "is not a number" in p.message.value and "color:#b00" in p.message.value
    p.button.click()  # the button re-submits the box's (bad) text: still refused
    assert p.guess == 1900.0


def test_range_is_enforced():
    p = Predict("How many of the 32 slots are busy?", lo=0, hi=32)
    assert not p.submit("33") and p.guess is None
    assert "33 cannot be the answer: it must be at most 32" in p.message.value


@pytest.mark.parametrize("text,reason", [("-5", "-5 cannot be the answer: it must be at least 0."),
                                         ("1e12", "1,000,000,000,000 is far beyond anything this question can give"),
                                         ("many", "“many” is not a number")])
def test_text_negative_and_absurd_entries_say_why_in_one_line_and_stay_in_the_box(text, reason):
    p = Predict("How many prompt tokens will the engine compute?", unit="tokens", lo=0)
    p.box.value = text  # what the learner typed (Enter)
    assert p.guess is None and reason in p.message.value and "<br" not in p.message.value
    assert p.box.value == text  # the entry is kept for the learner to correct
    p.box.value = "4000"
    assert p.guess == 4000.0


def test_reveal_puts_both_numbers_side_by_side_and_locks():
    p = Predict("How many tokens will slot 7 waste?", unit="tokens")
    p.submit("1500")
    # |1500 - 1980| / 1980 = 24%: more than the 10% tolerance, and low
    text = p.reveal(1980)
    assert text == "You said 1,500 tokens; the engine says 1,980 tokens: 24% off low."
    assert p.message.value == text and p.box.disabled and p.button.disabled
    assert not p.submit("1980") and p.guess == 1500.0


def test_compare_sentences():
    assert compare(None, 1980, "tokens") == "Enter your prediction in the box above, then run this cell again."
    assert compare(31, 31) == "You said 31; the engine says 31: exactly right."
    assert compare(0.95, 1.0, "s") == "You said 0.95 s; the engine says 1 s: 5% off low, close."  # 5% <= 10%
    assert compare(3, 0) == "You said 3; the engine says 0: 3 off high."  # no relative error against zero


def test_reveal_refuses_a_non_number_answer():
    p = Predict("q")
    for bad in (math.nan, "3", True):
        with pytest.raises(ValueError, match="answer"):
            p.reveal(bad)


def test_without_a_kernel_the_question_shows_as_text():
    p = Predict("How long is the stall?", unit="ms")
    bundle = p._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert data["text/plain"].startswith("Predict: How long is the stall?")
    assert "application/vnd.jupyter.widget-view+json" in data


@pytest.mark.parametrize("text,value", [("３２", 32.0), ("1，000", 1000.0), ("１．５", 1.5), ("１，９８０", 1980.0),
                                        ("－４", -4.0), ("\u22124.5", -4.5), ("\u3000２e３\u3000", 2000.0)])
def test_full_width_digits_commas_and_points_are_read(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["３２個", "一百", "１．５．２"])
def test_full_width_text_that_is_not_a_number_is_refused(text):
    with pytest.raises(ValueError, match="is not a number"):
        parse_number(text)


def test_predict_speaks_chinese_after_set_language():
    import tinyserve

    tinyserve.set_language("zh-TW")
    try:
        p = Predict("位子 7 會浪費幾個 token？", unit="token", lo=0)
        assert p.box.placeholder == "你的數字" and p.button.description == "鎖定"
        assert not p.submit("abc") and "「abc」不是數字" in p.message.value
        assert p.submit("１，２００") and p.guess == 1200.0 and p.message.value.startswith("你的預測：1,200 token。")
        assert p.reveal(1000) == "你預測 1,200 token，引擎算出 1,000 token：偏高 20%。"
        assert compare(0.95, 1.0, "s") == "你預測 0.95 s，引擎算出 1 s：偏低 5%，很接近。"
        assert compare(None, 5) == "先在上面的框裡輸入你的預測，再執行一次這個儲存格。"
    finally:
        tinyserve.set_language("en")
    assert compare(0.95, 1.0, "s") == "You said 0.95 s; the engine says 1 s: 5% off low, close."


HINT = {"en": "Enter your prediction in the box above, then run this cell again.",
        "zh-TW": "先在上面的框裡輸入你的預測，再執行一次這個儲存格。"}
PICK = {"en": "Pick an option above, then run this cell again.", "zh-TW": "先在上面選一個答案，再執行一次這個儲存格。"}


@pytest.fixture(params=["en", "zh-TW"])
def lang(request):
    import tinyserve

    tinyserve.set_language(request.param)
    yield request.param
    tinyserve.set_language("en")


def _digits(x) -> set[str]:
    """Every way the answer could be written: as given, with separators, rounded, as an integer."""
    from tinyserve_widgets.predict import _fmt

    forms = {str(x), _fmt(x), f"{x:g}", f"{x:.1f}", f"{x:.0f}", f"{x:,.0f}"}
    return {f for f in forms if len(f.replace(",", "").replace(".", "")) >= 2}


@pytest.mark.parametrize("answer", [58.5, 1980, 31, 0.44, 245, 7, 1234567, 3.25])
def test_reveal_without_a_prediction_never_shows_the_answer(lang, answer):
    p = Predict("How many?", unit="tokens", lo=0)
    text = p.reveal(answer)
    assert text == HINT[lang] and "\n" not in text  # one line, in the learner's language
    bundle = p._repr_mimebundle_()
    shown = text + p.message.value + (bundle[0] if isinstance(bundle, tuple) else bundle)["text/plain"]
    assert not any(ch.isdigit() for ch in text + p.message.value)
    for form in _digits(answer):
        assert form not in shown
    assert p.answer is None and not p.box.disabled and not p.button.disabled  # still open for a prediction
    assert p.submit("40") and p.guess == 40.0


@pytest.mark.parametrize("text,reason", [
    ("lots", {"en": "“lots” is not a number", "zh-TW": "「lots」不是數字"}),
    ("-5", {"en": "-5 cannot be the answer: it must be at least 0.", "zh-TW": "-5 不可能是答案：答案至少是 0。"}),
    ("1e12", {"en": "1,000,000,000,000 is far beyond anything", "zh-TW": "1,000,000,000,000 遠遠超出這一題可能的答案"})])
def test_bad_input_keeps_its_one_line_reason_in_both_languages_and_reveal_gives_only_the_hint(lang, text, reason):
    p = Predict("How many?", lo=0)
    p.box.value = text
    assert p.guess is None and reason[lang] in p.message.value and "<br" not in p.message.value
    assert p.reveal(58.5) == HINT[lang]
    assert reason[lang] in p.message.value and "58" not in p.message.value  # the reason stays, no answer
    assert p.box.value == text and not p.box.disabled


def test_reveal_after_a_prediction_shows_both_numbers(lang):
    p = Predict("How many?", unit="tokens", lo=0)
    assert p.reveal(1980) == HINT[lang]  # run before predicting: only the hint
    p.box.value = "1500"  # the learner predicts, then runs the reveal cell again
    text = p.reveal(1980)
    assert "1,500" in text and "1,980" in text and p.message.value == text
    assert p.box.disabled and p.button.disabled


def test_a_typed_but_unsent_prediction_counts_at_reveal():
    p = Predict("How many?")
    p.box.unobserve_all("value")  # the box's text reached the kernel without an Enter
    p.box.value = "12"
    assert p.reveal(10) == "You said 12; the engine says 10: 20% off high."


# ---- after_prediction: what a reveal cell shows, with and without a prediction ----

@pytest.fixture
def displayed(monkeypatch):
    """What the block hands to IPython's display (no kernel here: the outputs are recorded instead)."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    return shown


def _reveal_cell(p, answer):
    """A reveal cell as the lessons write one: the comparison, a sentence, a table row, a figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with p.after_prediction():
        print(p.reveal(answer))
        print(f"the engine computed {answer:,} tokens")
        fig, ax = plt.subplots(figsize=(2, 1))
        ax.bar([0], [answer])
    return plt


def test_without_a_prediction_a_reveal_cell_shows_the_hint_and_keeps_everything_else_closed(lang, displayed, capsys):
    p = Predict("How many?", unit="tokens", lo=0)
    plt = _reveal_cell(p, 4000)
    assert capsys.readouterr().out == ""  # nothing printed openly
    assert len(displayed) == 1 and not plt.get_fignums()  # one output; the figure closed, not drawn openly
    html, plain = displayed[0]["text/html"], displayed[0]["text/plain"]
    before, closed = html.split("<details>")
    on_screen = re.sub(r"<[^>]+>", "", before)  # the question's key is an attribute, not text
    assert on_screen == HINT[lang] and f"data-question='{p.key}'" in before  # on screen: the hint only
    assert "<details open" not in html and closed.count("</details>") == 1
    assert "4,000" in closed and "data:image/png;base64," in closed  # the answer, there for nbval, closed
    assert plain.startswith(HINT[lang]) and "4,000" in plain  # what nbval compares holds the engine's numbers
    assert p.answer is None and not p.box.disabled


def test_with_a_prediction_the_same_cell_shows_its_outputs_beside_the_prediction(lang, displayed, capsys):
    p = Predict("How many?", unit="tokens", lo=0)
    p.box.value = "1500"
    plt = _reveal_cell(p, 4000)
    out = capsys.readouterr().out
    assert "1,500" in out and "4,000" in out and not displayed  # shown as it comes
    assert plt.get_fignums()  # the figure left for the notebook to draw
    plt.close("all")


def test_a_bad_entry_reveals_nothing(displayed, capsys):
    p = Predict("How many?", lo=0)
    p.box.value = "lots"
    _reveal_cell(p, 4000)
    assert capsys.readouterr().out == "" and len(displayed) == 1 and "is not a number" in p.message.value


def test_an_error_in_the_block_still_raises_and_shows_what_ran_before_it(displayed, capsys):
    p = Predict("How many?")
    with pytest.raises(ZeroDivisionError):
        with p.after_prediction():
            print("step 1 done")
            1 / 0
    assert "step 1 done" in capsys.readouterr().out and not displayed


# ---- Choose: a question with options ----

from tinyserve_widgets.predict import Choose  # noqa: E402

OPTIONS = {64: "64", 512: "512", 4096: "4,096"}


def test_a_choice_offers_its_options_as_buttons_and_says_right_or_wrong_and_why(lang):
    c = Choose("Which chunk length?", OPTIONS)
    assert [label for label, _ in c.buttons.options] == ["64", "512", "4,096"] and c.buttons.value is None
    assert c.reveal(4096, why="Fewer steps.") == PICK[lang]  # nothing picked: the hint, no answer
    c.buttons.value = 512  # the learner clicks a button
    assert c.guess == 512
    text = c.reveal(4096, why="Fewer steps.")
    assert "512" in text and "4,096" in text and text.endswith("Fewer steps.") and "%" not in text
    assert ("right" not in text) if lang == "en" else ("答對" not in text)
    assert c.buttons.disabled and not c.submit(64)


def test_a_right_choice_is_called_right(lang):
    c = Choose("Which?", {"a": "replicas", "b": "split"})
    assert c.submit("split") and c.guess == "b"  # a label is read as its option
    text = c.reveal("b", why="Because.")
    assert text.endswith("Because.") and (("right" in text) if lang == "en" else ("答對了" in text))
    assert "%" not in text


@pytest.mark.parametrize("bad", [3, "five", "", None])
def test_an_option_not_offered_is_refused_in_one_line_and_reveals_nothing(lang, bad):
    c = Choose("Which?", OPTIONS)
    assert not c.submit(bad) and c.guess is None
    reason = {"en": "is not one of the options: 64 · 512 · 4,096.", "zh-TW": "不是選項之一：64 · 512 · 4,096。"}[lang]
    assert reason in c.message.value and "<br" not in c.message.value
    assert c.reveal(64, why="x") == PICK[lang] and c.answer is None


def test_a_choice_needs_two_options_and_an_answer_among_them():
    with pytest.raises(ValueError, match="at least two options"):
        Choose("Which?", {1: "one"})
    c = Choose("Which?", OPTIONS)
    c.submit(64)
    with pytest.raises(ValueError, match="one of the options"):
        c.reveal(100, why="x")


# ---- a prediction survives its cell run again, and opens the answers that wait on it ---------------------------
def test_a_question_cell_run_again_keeps_the_prediction_and_its_widget():
    p = Predict("How many?", unit="tokens", lo=0)
    assert p.submit("1,500")
    again = Predict("How many?", unit="tokens", lo=0)  # the cell run again (or Run All)
    assert again is p and again.guess == 1500.0 and again.box.value == "" and "1,500" in again.message.value
    other = Predict("How many more?", unit="tokens", lo=0)
    assert other is not p and other.guess is None  # another question starts empty
    c = Choose("Which?", {"a": "A", "b": "B"})
    assert c.submit("b") and Choose("Which?", {"a": "A", "b": "B"}).guess == "b"


def test_run_all_after_predicting_shows_the_answers_open(lang, displayed, capsys):
    p = Predict("How many?", unit="tokens", lo=0)
    p.submit("3000")
    p = Predict("How many?", unit="tokens", lo=0)  # Run All: the question cell first, then its reveal cell
    plt = _reveal_cell(p, 4000)
    out = capsys.readouterr().out
    assert "3,000" in out and "4,000" in out and not displayed  # shown as it comes, nothing closed
    plt.close("all")


def test_entering_a_prediction_opens_the_answers_already_drawn_closed(lang, displayed, capsys):
    p = Predict("How many?", unit="tokens", lo=0)
    _reveal_cell(p, 4000).close("all")  # Run All with nothing typed: two reveal cells, their answers closed
    _reveal_cell(p, 4000).close("all")
    assert [d["text/html"].count(f"data-question='{p.key}'") for d in displayed] == [1, 1]
    assert p.opener.opened == {} and p.answer is None  # nothing opened before a prediction
    assert not p.submit("lots") and p.opener.opened == {}  # nor by an entry that is no prediction
    assert p.submit("3000")
    sentence = p.opener.opened[p.key]  # the page opens every answer with this key, this sentence for its hint
    assert "3,000" in sentence and "4,000" in sentence and p.answer == 4000.0 and p.box.disabled  # settled, locked


def test_a_pick_opens_the_answers_already_drawn_closed(lang, displayed):
    c = Choose("Which?", {"a": "A", "b": "B"})
    with c.after_prediction():
        print(c.reveal("a", "because."))
    assert c.opener.opened == {} and len(displayed) == 1
    assert c.submit("b")
    assert "because." in c.opener.opened[c.key] and c.answer == "a" and c.buttons.disabled


def test_a_prediction_before_any_reveal_cell_opens_nothing_and_keys_differ_by_question():
    p = Predict("How many?")
    assert p.submit("3") and p.opener.opened == {} and p.answer is None  # the reveal cells have not run yet
    assert Predict("How many more?").key != p.key and Predict("How many?").key == p.key
