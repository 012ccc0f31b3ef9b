"""The gettext catalogs the words are read from (lib/tinyserve/locale), checked as they are read.

    locale/<domain>.pot                      msgctxt = the key t() takes, msgid = the English (the source)
    locale/zh_TW/LC_MESSAGES/<domain>.po     msgctxt = the key, msgid = the English it translates, msgstr = 繁體中文

Read with Babel. A malformed file is a CatalogError naming the file and the line (Babel's parser accepts some
broken lines, such as a string that lost its closing quote, so every line is checked here first). A translation
that cannot be used (missing, empty, fuzzy, made from other English than the .pot's, with other {fields}, or
other %-directives where the English is printf-style: argparse's own messages) is left out, so t() falls back
to English and never crashes a kernel; tests/lang/test_catalogs.py fails on it.
Not babel.messages.checkers: no {field} check; python_format takes prose "10% of" and a dropped %(name)s.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import TinyserveError

LOCALE = Path(__file__).resolve().parent.parent / "locale"
FOLDERS = {"zh-TW": "zh_TW"}  # a language code of tinyserve.lang -> its catalogs' folder (gettext's locale name)
# a line of a .po file: blank, a comment, or a keyword and/or one complete "..." string (escapes allowed)
_LINE = re.compile(r'\s*(#.*)?|\s*(#~\s*)?(msgctxt|msgid|msgid_plural|msgstr(\[\d+\])?)?\s*"(?:[^"\\]|\\.)*"\s*')
_BRACE = re.compile(r"\{\{|\}\}|[{}]")
# a printf-style directive as argparse's messages use them ("%s", "%(prog)s", "%r"); "%%" is a literal "%". No space
# flag: prose such as "10% of" or "20% (static)" is not a directive (Babel's own guess says it is)
_PERCENT = re.compile(r"%(?:\(([A-Za-z_]\w*)\))?[-#0+]*\d*(?:\.\d+)?([diouxXeEfFgGcrsa%])")
_CONTEXT = re.compile(r'msgctxt\s*"((?:[^"\\]|\\.)*)"\s*$')


class CatalogError(TinyserveError):
    """A .pot or .po file that cannot be read: the message starts with "file:line:"."""


def template(domain: str, folder: Path | None = None) -> Path:
    """The English template of a domain (in folder, LOCALE by default)."""
    return (folder or LOCALE) / f"{domain}.pot"


def translation(domain: str, lang: str, folder: Path | None = None) -> Path:
    """The catalog of a domain in a language ("zh-TW")."""
    return (folder or LOCALE) / FOLDERS[lang] / "LC_MESSAGES" / f"{domain}.po"


def read(path: Path, unique_contexts: bool = True):
    """The babel Catalog of a .pot or .po file; CatalogError("file:line: why") on a malformed one (the package's
    catalogs and the notebooks', chapters/editions.py). unique_contexts: a msgctxt is a key, used once (the
    package's catalogs); the notebooks' catalogs share contexts ("comment", a repeat's "2") among entries."""
    from babel.messages.pofile import PoFileError, read_po  # Babel only when the words are first needed

    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")  # (an editor's byte-order mark is not a line)
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise CatalogError(f"{path}:{line}: not UTF-8") from None
    seen: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not _LINE.fullmatch(line):
            raise CatalogError(f"{path}:{n}: not a line of a PO file: {line[:60]!r}")
        ctx = _CONTEXT.match(line)
        if ctx and ctx.group(1) and unique_contexts:  # (a msgctxt "" continued on the next lines is not checked)
            if ctx.group(1) in seen:
                raise CatalogError(f"{path}:{n}: msgctxt {ctx.group(1)!r} again (first on line {seen[ctx.group(1)]})")
            seen[ctx.group(1)] = n
    try:
        return read_po(text.splitlines(keepends=True), abort_invalid=True)
    except PoFileError as e:  # its lineno counts from 0
        raise CatalogError(f"{path}:{e.lineno + 1}: {str(e).rsplit(' on ', 1)[0]}") from None


def format_fields(text: str) -> set[str]:
    """The names of the replacement fields of a str.format string: "{name}", "{value!r}", "{x:.1f}" give name,
    value, x; a format spec's nested field counts too ("{x:{width}}": x, width); "{{" and "}}" are literal
    braces. ValueError on a brace that str.format would reject."""
    out: set[str] = set()
    if "{" not in text and "}" not in text:
        return out
    m = _BRACE.search(text)
    while m:
        if m.group() == "}":
            raise ValueError(f"single '}}' at {m.start()} in {text!r}")
        end = m.end()
        if m.group() == "{":
            depth = 1
            while end < len(text) and depth:  # a format spec may hold nested fields: {x:{width}}
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                end += 1
            if depth:
                raise ValueError(f"'{{' at {m.start()} is never closed in {text!r}")
            field = text[m.end():end - 1]  # name[!conversion][:spec]
            name = re.split(r"[!:]", field, maxsplit=1)[0]
            out.add(name)
            if ":" in field[len(name):]:
                out |= format_fields(field[len(name):].split(":", 1)[1])
        m = _BRACE.search(text, end)
    return out


def percent_fields(text: str) -> tuple[list[str], set[str]]:
    """The printf-style directives of text: the unnamed ones in order ("%s", "%r"), the named ones as a set
    ("%(prog)s"); "%%" is not one."""
    unnamed, named = [], set()
    for m in _PERCENT.finditer(text):
        if m.group(2) != "%":
            (named.add if m.group(1) else unnamed.append)(m.group())
    return unnamed, named


def is_percent_format(text: str) -> bool:
    """Whether text has a printf-style directive (the entry is then flagged python-format)."""
    return percent_fields(text) != ([], set())


def same_fields(english: str, translated: str) -> bool:
    """Whether a translation fills exactly the English's {fields}, and its printf-style directives where the
    English has some (False if either is not a format string)."""
    try:
        if format_fields(english) != format_fields(translated):
            return False
    except ValueError:
        return False
    return not is_percent_format(english) or percent_fields(english) == percent_fields(translated)


def read_templates(domains: tuple[str, ...], folder: Path | None = None) -> dict[str, dict[str, str]]:
    """{domain: {key: English}} from the templates, in their order; a key in two domains is a CatalogError."""
    out: dict[str, dict[str, str]] = {}
    where: dict[str, str] = {}
    for domain in domains:
        path = template(domain, folder)
        words = out[domain] = {}
        for msg in read(path):
            if not msg.id:  # the header
                continue
            if msg.pluralizable or not msg.context:
                why = "msgid_plural (plurals are not used: see tinyserve.lang)" if msg.pluralizable else "no msgctxt"
                raise CatalogError(f"{path}:{msg.lineno}: {why}")
            if msg.context in where:
                raise CatalogError(f"{path}:{msg.lineno}: key {msg.context!r} is also in {where[msg.context]}")
            words[msg.context] = msg.id
            where[msg.context] = path.name
    return out


def read_translations(lang: str, source: dict[str, dict[str, str]], folder: Path | None = None) -> dict[str, str]:
    """{key: translation} of every usable entry of a language's catalogs (source: read_templates()'s answer):
    present, not fuzzy, not empty, made from the English the template has now, filling the same fields."""
    out: dict[str, str] = {}
    for domain, words in source.items():
        path = translation(domain, lang, folder)
        if not path.exists():
            continue
        for msg in read(path):
            if (msg.id and not msg.pluralizable and not msg.fuzzy and msg.string and words.get(msg.context) == msg.id
                    and same_fields(msg.id, msg.string)):
                out[msg.context] = msg.string
    return out
