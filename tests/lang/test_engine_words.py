"""The engine's words: errors and rejection reasons follow the language; the presets' translations track their JSON."""
from __future__ import annotations

import dataclasses

import pytest

import tinyserve
from tinyserve import lang
from tinyserve.core.config import RunConfig
from tinyserve.core.workloads import get_workload
from tinyserve.cost.presets import get_preset, list_presets
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError


@pytest.fixture
def zh():
    tinyserve.set_language("zh-TW")
    yield
    tinyserve.set_language("en")


def test_every_preset_translation_is_of_the_presets_current_text():
    """A preset JSON edited without its translation would silently show the old English's Chinese: fail here."""
    keys = [k for k in lang.table() if k.startswith("engine.preset.") and k != "engine.preset.unknown"]
    assert keys
    for key in keys:
        name, _, what = key.removeprefix("engine.preset.").partition(".")
        hw = get_preset(name)
        if what.startswith("sources."):
            own = hw.sources[int(what.split(".")[1])]
        elif what.startswith("details."):
            own = hw.details[what.split(".", 1)[1]]
        else:
            own = getattr(hw, what)
        assert lang.table()[key]["en"] == own, key


def test_preset_texts_follow_the_language_and_an_edited_preset_speaks_its_own_words(zh):
    hw = get_preset("h200-70b-fp8")
    assert "H200" in hw.text() and "一張" in hw.text()
    zh_sources = hw.text("sources")
    assert len(zh_sources) == len(hw.sources) and all("。" in z or "，" in z for z in zh_sources)
    assert "位元組" in hw.text("details.kv_memory")
    mine = dataclasses.replace(hw, description="my own H200 fit", sources=["measured by me"])
    assert mine.text() == "my own H200 fit" and mine.text("sources") == ["measured by me"]
    for name in list_presets():  # every shipped preset's description has its translation
        assert get_preset(name).text() != get_preset(name).description


def test_knob_errors_and_rejections_are_english_by_default_and_chinese_when_chosen():
    with pytest.raises(TinyserveError, match=r"^timeout: does not apply to the continuous policy \(only to static "
                                             r"and dynamic\)$"):
        RunConfig("continuous", timeout=0.5)
    tr = Engine().run(get_workload("chapter-7.2-longtail", n=5), "continuous", batch_size=2, max_model_len=8,
                      dry_run=True, progress=False)
    assert all(r.finish_reason.endswith("exceeds max_model_len of 8") for r in tr.requests)
    tinyserve.set_language("zh-TW")
    try:
        with pytest.raises(TinyserveError, match=r"^timeout：不適用於 continuous policy（只適用於 static、dynamic）$"):
            RunConfig("continuous", timeout=0.5)
        tr = Engine().run(get_workload("chapter-7.2-longtail", n=5), "continuous", batch_size=2, max_model_len=8,
                          dry_run=True, progress=False)
        assert all(r.finish_reason.endswith("超過 max_model_len 8") for r in tr.requests)
        assert "假設情境" in Engine().run(get_workload("chapter-7.2-longtail", n=5), "continuous", slab="longest",
                                      dry_run=True, progress=False).slab_rule
    finally:
        tinyserve.set_language("en")
