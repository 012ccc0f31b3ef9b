"""The gettext catalogs of the package's words (lib/tinyserve/locale): every one parses, every key is translated,
reviewed (not fuzzy) and made from the English the template has now, with the same {fields}; a broken file is
named by file and line; at run time an unusable translation falls back to English."""
from __future__ import annotations

import re
import shutil
import string
from pathlib import Path

import pytest

from tinyserve import lang
from tinyserve.lang import catalogs
from tinyserve.lang.catalogs import CatalogError, format_fields, is_percent_format, percent_fields, read

ZH = "zh-TW"


def catalog_files(folder: Path) -> list[Path]:
    """Every .pot and .po under folder (not an editor's backup such as engine.po~)."""
    return sorted(p for p in folder.rglob("*") if p.suffix in (".pot", ".po"))


def problems(folder: Path | None = None) -> list[str]:
    """Every reason the zh-TW catalogs in folder fall short, each "file:line: why"."""
    out = []
    for domain in lang.AREAS:
        pot_path, po_path = catalogs.template(domain, folder), catalogs.translation(domain, ZH, folder)
        english = {m.context: m for m in read(pot_path) if m.id}
        if not po_path.exists():
            out.append(f"{po_path}: missing")
            continue
        seen = set()
        for m in read(po_path):
            if not m.id:
                continue
            where = f"{po_path.name}:{m.lineno}: {m.context}"
            seen.add(m.context)
            source = english.get(m.context)
            if source is None:
                out.append(f"{where}: no such key in {pot_path.name}")
            elif m.id != source.id:  # the English changed since this was translated
                out.append(f"{where}: stale: translates {m.id!r}; {pot_path.name}:{source.lineno} now says "
                           f"{source.id!r}")
            if not m.string:
                out.append(f"{where}: untranslated")
            if m.fuzzy:
                out.append(f"{where}: fuzzy (review it, then remove the flag)")
            if m.string and not catalogs.same_fields(m.id, m.string):
                out.append(f"{where}: msgstr fills other {{fields}} or %-directives than msgid: {m.string!r}")
        out += [f"{pot_path.name}:{m.lineno}: {k}: no entry in {po_path.name}" for k, m in english.items()
                if k not in seen]
    return out


def copy_locale(tmp_path: Path) -> Path:
    """A copy of the shipped catalogs to break."""
    return Path(shutil.copytree(catalogs.LOCALE, tmp_path / "locale"))


def line_of(path: Path, text: str) -> int:
    """The 1-based number of the first line of path that is text."""
    return path.read_text(encoding="utf-8").splitlines().index(text) + 1


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


@pytest.fixture
def reads_from(monkeypatch):
    """Point tinyserve.lang at another locale folder, with nothing read yet (restored afterwards)."""
    def use(folder: Path) -> None:
        monkeypatch.setattr(catalogs, "LOCALE", folder)
        for name, empty in (("_english", None), ("_domains", {}), ("_translated", {}), ("_table", None)):
            monkeypatch.setattr(lang, name, empty)
    return use


def test_every_catalog_parses_and_declares_its_language():
    files = sorted(p.relative_to(catalogs.LOCALE).as_posix() for p in catalog_files(catalogs.LOCALE))
    assert files == sorted([f"{a}.pot" for a in lang.AREAS] + [f"zh_TW/LC_MESSAGES/{a}.po" for a in lang.AREAS])
    for area in lang.AREAS:
        for path, language in ((catalogs.template(area), "en"), (catalogs.translation(area, ZH), "zh_TW")):
            plurals = read(path).num_plurals  # parses (CatalogError otherwise)
            head = path.read_text(encoding="utf-8").split("\n\n")[0]
            assert f'"Language: {language}\\n"' in head, path
            assert '"content-type: text/plain; charset=utf-8\\n"' in head.lower(), path  # msgmerge writes UTF-8
            assert language == "en" or ('"Plural-Forms: nplurals=1; plural=0;\\n"' in head and plurals == 1)


def test_every_key_is_translated_reviewed_current_and_fills_the_same_fields():
    found = problems()
    assert not found, f"{len(found)} problems:\n" + "\n".join(found[:30])


def test_format_flags_are_set_by_hand_never_guessed_from_prose():
    """Flags as written in the files (Babel re-guesses them when it reads, so read the text): python-brace-format
    exactly where the English has {fields}, python-format exactly where it has printf-style directives (argparse's
    messages), so a translator's tool checks the placeholders; never python-format for "10% of"."""
    wrong = []
    for path in catalog_files(catalogs.LOCALE):
        english = {m.context: m.id for m in read(path) if m.id}
        for block in path.read_text(encoding="utf-8").split("\n\n"):
            ctx = re.search(r'^msgctxt "(.*)"$', block, flags=re.M)
            if not ctx:
                continue
            flags = {f.strip() for ln in block.splitlines() if ln.startswith("#,") for f in ln[2:].split(",")}
            en = english[ctx.group(1)]
            want = {"python-brace-format"} if format_fields(en) else set()
            want |= {"python-format"} if is_percent_format(en) else set()
            if flags - {"fuzzy"} != want:
                wrong.append(f"{path.name}: {ctx.group(1)}: flags {sorted(flags)}, want {sorted(want)}")
    assert not wrong, wrong[:20]
    assert not any(is_percent_format(s) for s in ("within 10% of", "10-20% (static)", "share (%)", "{x:.1%}"))


def test_the_field_parser_reads_str_format_as_python_does():
    def python(text: str) -> set[str]:
        out = set()
        for _, name, spec, _ in string.Formatter().parse(text):
            if name is not None:
                out |= {name} | (python(spec) if spec else set())
        return out

    texts = [v for e in lang.table().values() for v in e.values()]
    texts += ["{name!r}", "{x:.1f} ms", "{{literal}} {n:,}", "{a:>{width}} {b!s:{w}.{p}f}", "}}{{", "{0[1]}"]
    assert [t for t in texts if format_fields(t) != python(t)] == []
    assert format_fields("{name!r}, {x:.1f}, {{not}}, {w:>{cols}}") == {"name", "x", "w", "cols"}
    for bad in ("a } b", "{open", "{a}}"):
        with pytest.raises(ValueError):
            list(string.Formatter().parse(bad))
        with pytest.raises(ValueError):
            format_fields(bad)
    assert not catalogs.same_fields("{a} of {b}", "{a} 的 {c}") and not catalogs.same_fields("{a}", "{a")
    assert catalogs.same_fields("{name:40s} {gap:8.1f}", "{gap:8.1f}  {name}")  # a spec may differ, not a name
    assert percent_fields("%(prog)s: %s and %r, 100%%") == (["%s", "%r"], {"%(prog)s"})
    assert catalogs.same_fields("%(prog)s: error: %(message)s", "%(prog)s：錯誤：%(message)s")
    assert not catalogs.same_fields("invalid %(type)s value: %(value)r", "無效的 %(type)s 值：%(value)s")
    assert not catalogs.same_fields("arguments: %s", "引數")
    assert catalogs.same_fields("within 10% of", "在 10 之內")  # prose "%" is not a directive


def test_no_entry_has_a_plural_form_and_a_template_with_one_is_refused(tmp_path):
    """Plurals (tinyserve.lang's docstring): zh-TW has one form; English says "(s)" or the code picks a key."""
    for path in catalog_files(catalogs.LOCALE):
        assert not [m.context for m in read(path) if m.pluralizable], path.name
        assert "msgid_plural" not in path.read_text(encoding="utf-8"), path.name
    folder = copy_locale(tmp_path)
    pot = catalogs.template("figures", folder)
    edit(pot, 'msgid "; "\nmsgstr ""', 'msgid "; "\nmsgid_plural "; "\nmsgstr[0] ""\nmsgstr[1] ""')
    line = line_of(pot, 'msgid "; "')
    with pytest.raises(CatalogError, match=rf"^{re.escape(str(pot))}:{line}: msgid_plural"):
        catalogs.read_templates(lang.AREAS, folder)


@pytest.mark.parametrize("breakage", ["a stray line", "a lost closing quote", "msgstr missing", "a key twice"])
def test_a_malformed_catalog_is_named_by_file_and_line(tmp_path, breakage):
    po = catalogs.translation("figures", ZH, copy_locale(tmp_path))
    ctx = 'msgctxt "figures.story.paused"'
    n = line_of(po, ctx)  # msgctxt, msgid, msgstr on lines n, n + 1, n + 2
    lines = po.read_text(encoding="utf-8").splitlines()
    if breakage == "a stray line":
        lines.insert(n, "this is not a line of a PO file")
        bad = n + 1
    elif breakage == "a lost closing quote":
        lines[n + 1] = lines[n + 1].rstrip('"')
        bad = n + 2
    elif breakage == "msgstr missing":
        del lines[n + 1]
        bad = n + 1
    else:
        lines += ["", *lines[n - 1:n + 2]]
        bad = len(lines) - 2
    po.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CatalogError) as e:
        read(po)
    assert str(e.value).startswith(f"{po}:{bad}: "), str(e.value)


def test_a_broken_placeholder_an_empty_or_fuzzy_entry_is_named_by_file_and_line(tmp_path):
    folder = copy_locale(tmp_path)
    po = catalogs.translation("figures", ZH, folder)
    edit(po, 'msgstr " | 暫停：{ids}"', 'msgstr " | 暫停：{id}"')
    edit(po, 'msgstr " | 等待：{groups}"', 'msgstr ""')
    edit(po, 'msgctxt "figures.story.sep"', '#, fuzzy\nmsgctxt "figures.story.sep"')
    found = problems(folder)
    msgid = {k: line_of(po, f'msgctxt "figures.story.{k}"') + 1 for k in ("paused", "waiting", "sep")}
    assert found == [
        f"figures.po:{msgid['paused']}: figures.story.paused: msgstr fills other {{fields}} or %-directives than "
        "msgid: "
        "' | 暫停：{id}'",
        f"figures.po:{msgid['waiting']}: figures.story.waiting: untranslated",
        f"figures.po:{msgid['sep']}: figures.story.sep: fuzzy (review it, then remove the flag)"], found


def test_changing_one_english_sentence_fails_the_suite_until_its_translation_is_reviewed(tmp_path, reads_from):
    """The demonstration issue 32 asks for: edit one msgid of a template (what a developer does to change the
    English); its zh-TW entry still translates the old sentence, so the check fails on it and names it, and a
    kernel shows the new English rather than a translation of the old one."""
    folder = copy_locale(tmp_path)
    assert problems(folder) == []  # the untouched copy passes
    pot, po = catalogs.template("engine", folder), catalogs.translation("engine", ZH, folder)
    old = "timeout: must be a finite number of seconds >= 0, got {value!r}"
    new = "timeout: must be a finite, non-negative number of seconds, got {value!r}"
    edit(pot, f'msgid "{old}"', f'msgid "{new}"')
    found = problems(folder)
    po_line, pot_line = line_of(po, f'msgid "{old}"'), line_of(pot, f'msgid "{new}"')
    assert found == [f"engine.po:{po_line}: engine.knob.timeout: stale: translates {old!r}; "
                     f"engine.pot:{pot_line} now says {new!r}"], found
    reads_from(folder)
    assert lang.t("engine.knob.timeout", ZH, value=-1) == new.format(value=-1)
    assert lang.t("engine.knob.integer", ZH, name="n", lo=1, value=0) == "n：必須是 >= 1 的整數，收到的是 0"


def test_a_missing_or_unusable_translation_falls_back_to_english_at_run_time(tmp_path, reads_from):
    folder = copy_locale(tmp_path)
    po = catalogs.translation("figures", ZH, folder)
    edit(po, 'msgstr " | 暫停：{ids}"', 'msgstr " | 暫停：{ids"')  # would raise in str.format
    edit(po, 'msgstr " | 等待：{groups}"', 'msgstr ""')
    edit(po, 'msgctxt "figures.story.sep"', '#, fuzzy\nmsgctxt "figures.story.sep"')
    catalogs.translation("ch7_6", ZH, folder).unlink()  # a whole catalog missing
    reads_from(folder)
    assert lang.t("figures.story.paused", ZH, ids="A, B") == " | paused: A, B"
    assert lang.t("figures.story.waiting", ZH, groups="C") == " | waiting: C"
    assert lang.t("figures.story.sep", ZH) == "; "
    assert all(lang.t(k, ZH) == lang.english(k) for k in lang.table() if k.startswith("7.6.")
               and not format_fields(lang.english(k)))
    assert lang.t("figures.story.iter", ZH, k=3) == "迭代  3："  # the rest still translated
    assert "zh-TW" not in lang.table()["figures.story.sep"] and lang.table()["figures.story.iter"][ZH]


def test_a_key_in_two_areas_is_refused_naming_both_files(tmp_path):
    folder = copy_locale(tmp_path)
    pot = catalogs.template("ch7_6", folder)  # an area read after engine's
    first = re.search(r'^msgctxt "(.*)"$', pot.read_text(encoding="utf-8"), flags=re.M).group(0)
    edit(pot, first, 'msgctxt "engine.and"')
    with pytest.raises(CatalogError, match=r"ch7_6\.pot:\d+: key 'engine\.and' is also in engine\.pot"):
        catalogs.read_templates(lang.AREAS, folder)


def test_the_catalogs_ship_as_package_data_with_babel_declared():
    """pyproject's package-data patterns cover every catalog (a wheel without them would speak only KeyError)."""
    import fnmatch
    import tomllib
    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = project["tool"]["setuptools"]["package-data"]["tinyserve"]
    package = catalogs.LOCALE.parent
    unshipped = [p.relative_to(package).as_posix() for p in catalog_files(catalogs.LOCALE)
                 if not any(fnmatch.fnmatch(p.relative_to(package).as_posix(), pat) for pat in patterns)]
    assert not unshipped, unshipped
    assert any(d.replace(" ", "").lower().startswith("babel==") for d in project["project"]["dependencies"])
