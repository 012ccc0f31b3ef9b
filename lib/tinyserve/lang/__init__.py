"""Every word a learner reads, in one table, each entry in every language side by side.

    import tinyserve
    tinyserve.set_language("zh-TW")            # or "en" (the default); one call for everything
    from tinyserve.lang import t
    t("waste.sentence.wasted", wasted=31, slots=32)

The table is split by who speaks (`widgets`, `classroom`, `figures`, one module per notebook, ...); each
module holds `WORDS = {key: {"en": ..., "zh-TW": ...}}` and every key is unique across modules. Torch-free and
free of widget libraries: the engine's messages, the checkers, the static figures and the widgets all read it.
A test fails when a key lacks a language, so a learner never sees a raw key or a half-translated view.
"""
from __future__ import annotations

import importlib
import unicodedata

LANGUAGES: dict[str, str] = {"en": "English", "zh-TW": "繁體中文 (Traditional Chinese, Taiwan)"}
ALIASES = {"zh-tw": "zh-TW", "zh_tw": "zh-TW", "zh-hant": "zh-TW", "zh-hant-tw": "zh-TW", "zh": "zh-TW",
           "en-us": "en", "en-gb": "en", "en_us": "en"}
AREAS = ("widgets", "classroom", "exercises", "figures", "engine", "ch7_0", "ch7_1", "ch7_2", "ch7_3", "ch7_4",
         "ch7_5", "ch7_6")

_state = {"lang": "en"}
_table: dict[str, dict[str, str]] | None = None
_listeners: list = []


def table() -> dict[str, dict[str, str]]:
    """The merged table of every area (built once); a key defined by two areas is an error."""
    global _table
    if _table is None:
        merged: dict[str, dict[str, str]] = {}
        for area in AREAS:
            words = importlib.import_module(f"{__name__}.{area}").WORDS
            clash = merged.keys() & words.keys()
            if clash:
                raise KeyError(f"tinyserve.lang.{area} redefines {sorted(clash)[:5]}")
            merged.update(words)
        _table = merged
    return _table


def normalize(code: str) -> str:
    """The table's code for a language code ("zh_TW", "zh-Hant" -> "zh-TW"); ValueError naming the choices."""
    if isinstance(code, str):
        c = code.strip()
        if c in LANGUAGES:
            return c
        if c.lower() in ALIASES:
            return ALIASES[c.lower()]
    raise ValueError(f"unknown language {code!r}; available: "
                     + ", ".join(f"{k} ({v})" for k, v in LANGUAGES.items()))


def set_language(code: str) -> str:
    """Choose the language of every learner-facing string (and the figures' fonts); returns its code."""
    lang = normalize(code)
    _state["lang"] = lang
    for fn in list(_listeners):
        fn(lang)
    from . import fonts  # matplotlib's CJK fallback, and one warning when no CJK font is installed
    fonts.apply(lang)
    return lang


def language() -> str:
    """The current language's code."""
    return _state["lang"]


def on_change(fn) -> None:
    """Call fn(code) whenever the language changes (a view that caches labels redraws)."""
    _listeners.append(fn)


def t(key: str, lang: str | None = None, **fields) -> str:
    """The string for key in the current language (or lang), filled with str.format(**fields)."""
    entry = table()[key]  # KeyError: a key used but never written (tests/lang catches it)
    text = entry.get(lang or _state["lang"]) or entry["en"]
    return text.format(**fields) if fields else text


def say(key: str, **fields) -> None:
    """print(t(key, **fields)): a notebook's printed result."""
    print(t(key, **fields))


def width(text: str) -> int:
    """Display width in terminal columns: a CJK (wide or full-width) character takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else (0 if unicodedata.combining(ch) else 1)
               for ch in text)


def ljust(text: str, columns: int) -> str:
    """text padded on the right to `columns` display columns (str.ljust, counting a CJK character as two)."""
    return text + " " * max(0, columns - width(text))


def rjust(text: str, columns: int) -> str:
    """text padded on the left to `columns` display columns."""
    return " " * max(0, columns - width(text)) + text


def wrap(text: str, columns: int) -> list[str]:
    """Lines of at most `columns` display columns: breaks at spaces, and between CJK characters (no spaces
    there); never before closing punctuation such as ，。、）."""
    no_start = set("，。、；：！？）」』》〉,.;:!?)]}%")
    lines: list[str] = []
    for para in text.split("\n"):
        line, cols = "", 0
        for tok in _tokens(para):
            w = width(tok)
            if line and cols + w > columns and tok[:1] not in no_start and not tok.isspace():
                lines.append(line.rstrip())
                line, cols = "", 0
            if not line and tok.isspace():
                continue
            line, cols = line + tok, cols + w
        lines.append(line.rstrip())
    return lines


def _tokens(text: str) -> list[str]:
    """Words, single spaces, and single CJK characters (each a place a line may break)."""
    out, word = [], ""
    for ch in text:
        if ch.isspace() or unicodedata.east_asian_width(ch) in "WF":
            if word:
                out.append(word)
                word = ""
            out.append(ch)
        else:
            word += ch
    if word:
        out.append(word)
    return out


def fill(text: str, columns: int) -> str:
    """wrap() joined by newlines (textwrap.fill, counting display width)."""
    return "\n".join(wrap(text, columns))
