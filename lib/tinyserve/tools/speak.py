"""The command line's language: the user's locale, read as gettext reads it, and argparse's own words in it.

TINYSERVE_LANG (en, zh-TW, or any code tinyserve.set_language takes) overrides. Otherwise, as Python's
gettext.find: the first of LANGUAGE, LC_ALL, LC_MESSAGES, LANG that is set decides; its value is a colon list
(only LANGUAGE holds several) and the first entry we have words for wins; "C" or "POSIX" ends the search in
English. A locale name "zh_TW.UTF-8" is zh-TW (ll_CC, then ll, as gettext tries them); a language we have no
words for (zh_CN, fr) is passed over, and at the end English is what is left.

argparse writes its messages ("usage: ", "the following arguments are required: %s", ...) through its
module's `_` (gettext.gettext), looked up each time. While one of our parsers builds and parses, that `_`
answers from tinyserve.lang's `cli.argparse.*` entries, whose English is argparse's msgid; it is put back after,
so no other parser in the process changes.
"""
from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator, Mapping

from ..errors import TinyserveError
from ..lang import LANGUAGES, normalize, t

LOCALE_VARIABLES = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")  # gettext's order
ARGPARSE_KEYS = ("usage", "positional", "options", "help", "error", "required", "choice", "argument",
                 "unrecognized", "one_value", "type", "not_with", "ambiguous", "explicit")
_CODES = {code.lower().replace("-", "_"): code for code in LANGUAGES}  # "zh_tw" -> "zh-TW", "en" -> "en"


def from_locale(name: str) -> str | None:
    """The language of one locale name ("zh_TW.UTF-8" -> "zh-TW", "en_GB" -> "en", "C" -> "en"); None when we
    have no words for it."""
    code = name.split(".")[0].split("@")[0].strip()
    if code in ("C", "POSIX"):
        return "en"
    for candidate in (code, code.split("_")[0]):
        if candidate.lower() in _CODES:
            return _CODES[candidate.lower()]
    return None


def locale_language(env: Mapping[str, str]) -> str:
    """The language the locale variables ask for (gettext's lookup), English when none we have."""
    for var in LOCALE_VARIABLES:
        if env.get(var):
            for name in env[var].split(":"):
                lang = from_locale(name) if name else None
                if lang:
                    return lang
            return "en"
    return "en"


def users_language(env: Mapping[str, str] | None = None) -> str:
    """TINYSERVE_LANG when set (a TinyserveError, in the locale's language, for one we do not have), else the
    locale's language."""
    env = os.environ if env is None else env
    own = env.get("TINYSERVE_LANG", "").strip()
    if not own:
        return locale_language(env)
    try:
        return normalize(own)
    except ValueError:
        raise TinyserveError(t("cli.lang.unknown", lang=locale_language(env), value=own,
                               choices=", ".join(LANGUAGES))) from None


@contextlib.contextmanager
def argparse_words() -> Iterator[None]:
    """Within: argparse's messages in the current language (built parsers keep the titles they were built with)."""
    english = argparse._
    keys = {t(f"cli.argparse.{k}", lang="en"): f"cli.argparse.{k}" for k in ARGPARSE_KEYS}
    argparse._ = lambda msgid: t(keys[msgid]) if msgid in keys else english(msgid)
    try:
        yield
    finally:
        argparse._ = english
