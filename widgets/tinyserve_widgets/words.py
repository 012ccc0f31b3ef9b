"""The widgets' words live in tinyserve's one language table (catalog tinyserve/locale/widgets.pot); this module
re-exports its lookup so `from tinyserve_widgets.words import t` keeps working.

    import tinyserve
    tinyserve.set_language("zh-TW")        # every view, sentence and figure font drawn after this is in 繁體中文
    from tinyserve_widgets.words import t
    t("waste.sentence.wasted", wasted=31, slots=32)
"""
from __future__ import annotations

from tinyserve.lang import language, set_language, t

__all__ = ["language", "set_language", "t"]
