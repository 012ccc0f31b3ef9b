"""The CLI's language from the environment, as gettext reads a locale; argparse's words only while we parse."""
from __future__ import annotations

import argparse

import pytest

import tinyserve
from tinyserve.errors import TinyserveError
from tinyserve.tools.speak import argparse_words, from_locale, users_language


@pytest.mark.parametrize("env,expected", [
    ({}, "en"),
    ({"LANG": "zh_TW.UTF-8"}, "zh-TW"),
    ({"LANG": "zh_TW"}, "zh-TW"),
    ({"LANG": "C"}, "en"),
    ({"LANG": "C.UTF-8"}, "en"),
    ({"LANG": "POSIX"}, "en"),
    ({"LANG": "zh_CN.UTF-8"}, "en"),  # Simplified Chinese: no words for it, so English (gettext: no catalog)
    ({"LANG": "en_GB.UTF-8"}, "en"),
    ({"LANG": "fr_FR.UTF-8"}, "en"),
    ({"LC_ALL": "zh_TW.UTF-8", "LANG": "C"}, "zh-TW"),  # gettext's order: LC_ALL before LANG
    ({"LC_MESSAGES": "C", "LANG": "zh_TW.UTF-8"}, "en"),
    ({"LANGUAGE": "fr:zh_TW:en", "LANG": "C"}, "zh-TW"),  # LANGUAGE: the first of the list we have words for
    ({"LANGUAGE": "en:zh_TW", "LANG": "zh_TW.UTF-8"}, "en"),
    ({"LANGUAGE": "", "LANG": "zh_TW.UTF-8"}, "zh-TW"),  # set but empty: not set
    ({"TINYSERVE_LANG": "en", "LANG": "zh_TW.UTF-8"}, "en"),  # ours overrides the locale
    ({"TINYSERVE_LANG": "zh_TW", "LANG": "C"}, "zh-TW"),
])
def test_users_language(env, expected):
    assert users_language(env) == expected


def test_a_locale_name_is_read_as_gettext_reads_it():
    assert from_locale("zh_TW.UTF-8@euro") == "zh-TW" and from_locale("en") == "en" and from_locale("ja_JP") is None


def test_an_unknown_tinyserve_lang_is_an_error_in_the_locales_language():
    with pytest.raises(TinyserveError, match=r"^TINYSERVE_LANG: unknown 'xx' \(choose en, zh-TW\)$"):
        users_language({"TINYSERVE_LANG": "xx"})
    with pytest.raises(TinyserveError, match=r"^TINYSERVE_LANG：沒有 'xx' 這個語言"):
        users_language({"TINYSERVE_LANG": "xx", "LANG": "zh_TW.UTF-8"})


def test_argparse_speaks_the_language_only_inside_and_is_put_back():
    english = argparse._
    tinyserve.set_language("zh-TW", figures=False)
    try:
        with argparse_words():
            p = argparse.ArgumentParser(prog="x")
            p.add_argument("--n", type=int, required=True)
            assert p.format_usage().startswith("用法：x")
            assert "顯示這段說明後結束" in p.format_help()
            with pytest.raises(SystemExit):
                p.parse_args([])
        assert argparse._ is english
        assert argparse.ArgumentParser(prog="y").format_usage().startswith("usage: y")
    finally:
        tinyserve.set_language("en", figures=False)


def test_main_speaks_the_locale_and_gives_the_callers_language_back(monkeypatch, capsys):
    from tinyserve.tools.cli import main

    monkeypatch.setenv("LANG", "zh_TW.UTF-8")
    for var in ("TINYSERVE_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    assert main(["run", "--workload", "chapter-7.1-padding", "--policy", "nope", "--dry-run"]) == 2
    assert capsys.readouterr().err == "tinyserve：錯誤：policy：沒有 'nope' 這個選項（可選 static, dynamic, continuous, chunked）\n"
    assert tinyserve.language() == "en"
