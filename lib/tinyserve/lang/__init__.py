"""Every word a learner reads, in gettext catalogs: English as the template, each translation beside it.

    import tinyserve
    tinyserve.set_language("zh-TW")            # or "en" (the default); one call for everything
    from tinyserve.lang import t
    t("waste.sentence.wasted", wasted=31, slots=32)

The words are split by who speaks, one gettext domain per area (AREAS: `widgets`, `classroom`, `figures`, one
per notebook, ...): lib/tinyserve/locale/<area>.pot holds the English (msgctxt = the key t() takes, msgid = the
English: developers edit it), lib/tinyserve/locale/zh_TW/LC_MESSAGES/<area>.po the 繁體中文 (msgctxt = the key,
msgid = the English it translates, msgstr = the translation: translators edit it, chapters/README.md says how).
Every key is unique across areas. The English is read once, on the first t() (catalogs.py, with Babel: about
50 ms), a translation's catalogs on the first t() in that language; after that a t() is a dict lookup. Torch-free
and free of widget libraries: the engine's messages, the CLI, the checkers, the figures and the widgets read it.
A translation that is missing, fuzzy, empty, made from English the .pot no longer has, or fills other {fields}
is not used: t() falls back to English, and tests/lang/test_catalogs.py fails on it.

Plurals: no entry has a plural form (msgid_plural). 繁體中文 has one form (Plural-Forms: nplurals=1), so a
plural entry would only ever serve English. Where a count can be 1 the English says "(s)" ("{n} file(s) not
gradable"); where the sentence would read badly that way, the code picks between two keys (one for 1, one for
more). catalogs.read_templates() rejects a msgid_plural in a .pot; tests/lang/test_catalogs.py checks both files.
"""
from __future__ import annotations

import re
import string
import unicodedata
from functools import lru_cache

LANGUAGES: dict[str, str] = {"en": "English", "zh-TW": "繁體中文 (Traditional Chinese, Taiwan)"}
ALIASES = {"zh-tw": "zh-TW", "zh_tw": "zh-TW", "zh-hant": "zh-TW", "zh-hant-tw": "zh-TW", "zh": "zh-TW",
           "en-us": "en", "en-gb": "en", "en_us": "en"}
AREAS = ("widgets", "classroom", "exercises", "figures", "engine", "cli", "ch7_0", "ch7_1", "ch7_2", "ch7_3",
         "ch7_4", "ch7_5", "ch7_6", "ch7_7")

_state = {"lang": "en"}
_domains: dict[str, dict[str, str]] = {}  # {area: {key: English}}, read on the first t()
_english: dict[str, str] | None = None  # {key: English}, all areas
_translated: dict[str, dict[str, str]] = {}  # {code: {key: translation}}, each read on its first use
_table: dict[str, dict[str, str]] | None = None
_listeners: list = []


def _source() -> dict[str, str]:
    """{key: English} of every area (the templates, read once)."""
    global _english
    if _english is None:
        from .catalogs import read_templates
        _domains.update(read_templates(AREAS))
        _english = {key: text for words in _domains.values() for key, text in words.items()}
    return _english


def _translations(code: str) -> dict[str, str]:
    """{key: translation} of a language (its catalogs, read on its first use; English kernels never read them)."""
    if code not in _translated:
        from .catalogs import FOLDERS, read_translations
        _source()
        _translated[code] = read_translations(code, _domains) if code in FOLDERS else {}
    return _translated[code]


def table() -> dict[str, dict[str, str]]:
    """{key: {"en": ..., "zh-TW": ...}} of every area and language (a translation that cannot be used is absent);
    a key in two areas, or a malformed catalog, is a CatalogError naming the file and line."""
    global _table
    if _table is None:
        others = {code: _translations(code) for code in LANGUAGES if code != "en"}
        _table = {key: {"en": en, **{code: tr[key] for code, tr in others.items() if key in tr}}
                  for key, en in _source().items()}
    return _table


def english(key: str) -> str | None:
    """The English of key as its template has it now (None for no such key); reads no translation."""
    return _source().get(key)


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


def set_language(code: str, figures: bool = True) -> str:
    """Choose the language of every learner-facing string (and the figures' fonts); returns its code.
    figures=False: no font set-up (a terminal program, such as the CLI, draws no figures)."""
    lang = normalize(code)
    _state["lang"] = lang
    for fn in list(_listeners):
        fn(lang)
    if figures:
        from . import drawn, fonts  # matplotlib's CJK fallback, and one warning when no CJK font is installed
        fonts.apply(lang)
        drawn.install()  # only where chapters/build.py asks ($TINYSERVE_RECORD_TEXT): figures' words as drawn
    return lang


def language() -> str:
    """The current language's code."""
    return _state["lang"]


def on_change(fn) -> None:
    """Call fn(code) whenever the language changes (a view that caches labels redraws)."""
    _listeners.append(fn)


def t(key: str, lang: str | None = None, **fields) -> str:
    """The string for key in the current language (or lang), filled with str.format(**fields)."""
    code = lang or _state["lang"]
    text = _translations(code).get(key) if code != "en" else None
    if text is None:
        return _source()[key].format(**fields) if fields else _source()[key]  # KeyError: a key never written
    return fill_spaced(text, fields) if fields else text


# A Chinese character meets a Latin letter or a digit across a space, as the 繁體中文 edition writes it
# ("KV 佔 0.033 GB", "prefill 用 chunk 512"); full-width punctuation meets anything without one ("32、").
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
LATIN = re.compile(r"[A-Za-z0-9]")
_FORMAT = string.Formatter()


def needs_space(left: str, right: str) -> bool:
    """Whether the last character of left and the first of right are a Chinese character and a Latin letter or
    digit (either way round)."""
    a, b = left[-1:], right[:1]
    return bool(a and b and (HAN.match(a) and LATIN.match(b) or LATIN.match(a) and HAN.match(b)))


@lru_cache(maxsize=4096)
def _parsed(text: str) -> tuple:
    return tuple(_FORMAT.parse(text))


def fill_spaced(text: str, fields: dict) -> str:
    """text.format(**fields), with a space where a field's value meets a Chinese character on one side and a Latin
    letter or digit on the other: a translation cannot know whether a field renders a word of its own language
    ("整段提示詞") or a Latin one ("chunk 512"). The literal text is the translator's, as written."""
    out, after_field = "", False
    for literal, name, spec, conv in _parsed(text):
        out += (" " if after_field and needs_space(out, literal) else "") + literal
        after_field = name is not None
        if name is not None:
            value = _FORMAT.convert_field(_FORMAT.get_field(name, (), fields)[0], conv)
            value = _FORMAT.format_field(value, _FORMAT.vformat(spec, (), fields) if "{" in spec else spec)
            out += (" " if needs_space(out, value) else "") + value
    return out


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
