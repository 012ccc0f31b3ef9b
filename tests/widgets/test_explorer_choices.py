"""Every choice control of every explorer the chapters build shows its value (issue 52, item 1): a Dropdown,
ToggleButtons or SelectionSlider whose value is not among its options, or is None (ipywidgets then selects
nothing: label and index None, and the browser draws an empty box), fails here, in both editions, at the settings
the chapter opens the explorer with, after a language change and after each choice is moved.

The explorer calls are read from the chapters' sources (chapters/src/*.py): each top-level `tw.*Explorer(...)`
call, built as the notebook builds it, from the statements of the source its arguments need (the imports and the
assignments they name, found by reading the source, in source order)."""
from __future__ import annotations

from pathlib import Path

import ipywidgets as W
import pytest

import tinyserve
from chapter_calls import explorer_calls

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "chapters" / "src").glob("7.*.py"))
Selection = W.widgets.widget_selection._Selection  # Dropdown, ToggleButtons, SelectionSlider, ... share it


CALLS = [(f"{p.stem}:{k}", p) for p in SOURCES for k in range(len(explorer_calls(p)))]


def test_the_chapters_build_explorers_to_walk():
    """The walk finds the chapters' explorers (7.1, 7.2, 7.3 twice, 7.4 today): a source change that hid them
    from it would otherwise leave the checks below with nothing to check."""
    names = [name for name, _ in CALLS]
    assert len(names) >= 5 and any("7.3" in n for n in names), names
    assert sum("DeploymentExplorer" in call for p in SOURCES for _, call in explorer_calls(p)) >= 1


def build(path: Path, k: int):
    program, call = explorer_calls(path)[k]
    ns: dict = {}
    exec(compile(program, str(path), "exec"), ns)  # noqa: S102  the chapter's own statements
    return eval(call, ns)  # noqa: S307


def choices(ex) -> dict[str, W.Widget]:
    """Every choice control the explorer shows, by its knob's name (its own knobs dict: shown or not, each is
    a control the learner can be offered) and the rest of its widget tree."""
    found, seen = {}, set()
    for name, w in getattr(ex, "knobs", {}).items():
        if isinstance(w, Selection):
            found[name], _ = w, seen.add(id(w))
    stack = [ex.widget]
    while stack:
        w = stack.pop()
        if isinstance(w, Selection) and id(w) not in seen:
            found[f"{type(w).__name__}#{len(found)}"] = w
            seen.add(id(w))
        stack.extend(getattr(w, "children", ()))
    return found


def blank(ex) -> list[str]:
    """The choice controls showing no value: index or label None, or an empty label at the index."""
    out = []
    for name, w in choices(ex).items():
        shown = w._options_labels[w.index] if w.index is not None else None
        if w.index is None or w.label is None or not shown:
            out.append(f"{name}: value {w.value!r}, index {w.index!r}, label {w.label!r}")
    return out


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
@pytest.mark.parametrize("name,path", CALLS, ids=[n for n, _ in CALLS])
def test_every_choice_shows_its_value_at_the_opening_settings(name, path, lang):
    tinyserve.set_language(lang)
    try:
        ex = build(path, int(name.rsplit(":", 1)[1]))
        assert choices(ex)
        assert not blank(ex), blank(ex)
        tinyserve.set_language("en" if lang == "zh-TW" else "zh-TW")  # a language change relabels every option
        assert not blank(ex), blank(ex)
    finally:
        tinyserve.set_language("en")


@pytest.mark.slow  # ~11 s: some 25 runs of 200 requests
def test_the_deployment_explorers_choices_show_their_value_after_every_move():
    """7.3's deployment explorer: each choice moved to its last option and back to its first; after every move
    no control is blank (the 'as the run's' options among them: values of their own, turned into None only where
    the configs are built)."""
    ((name, path),) = [(n, p) for n, p in CALLS if "7.3" in n and "DeploymentExplorer" in
                       explorer_calls(p)[int(n.rsplit(":", 1)[1])][1]]
    ex = build(path, int(name.rsplit(":", 1)[1]))
    for knob, w in choices(ex).items():
        if knob not in ex.knobs or w.disabled:
            continue
        for value in (w._options_values[-1], w._options_values[0]):
            ex.set(**{knob: value})
            assert ex.knobs[knob].value == value
            assert not blank(ex), (knob, value, blank(ex))
    assert ex.knobs["decode_batch_size"].label == "as the run's"
    assert ex.configs()[2].decode_batch_size is None  # "as the run's": the config holds no knob of its own
    ex.set(decode_batch_size=None, prefill_chunk_size=None)  # None, as a caller says it: the same options
    assert not blank(ex) and ex.knobs["prefill_chunk_size"].label == "as the chunk below"
