"""The notebooks' translation catalogs (chapters/locale/zh_TW/<notebook>.po) against the English as it is now.

The English is extracted afresh from chapters/src/ and chapters/solutions/ on every run, so an English block that
changed has no entry and fails here (and stops chapters/build.py) until a translator reviews its translation.
"""
from __future__ import annotations

import io
import re
import shutil
import sys
import tokenize
from pathlib import Path

import pytest

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
sys.path.insert(0, str(CHAPTERS))
try:
    import build
    import editions
finally:
    sys.path.remove(str(CHAPTERS))

NOTEBOOKS = editions.notebooks()
LANGS = sorted(editions.FOLDERS)
STEM = "7.6-appendix-evidence"  # the copies below: a short lesson with {glue} roles


def test_every_notebook_has_one_catalog_per_edition_and_every_catalog_a_notebook():
    assert len(NOTEBOOKS) == 12  # the lessons 7.0-7.7 and the exercises of 7.1-7.4
    for lang in LANGS:
        have = sorted(p.stem for p in (CHAPTERS / "locale" / editions.FOLDERS[lang]).glob("*.po"))
        assert have == NOTEBOOKS, lang
    assert not (CHAPTERS / "src" / "zh-TW").exists()  # the catalogs replaced the translated sources


@pytest.mark.parametrize("lang", LANGS)
def test_every_catalog_parses_and_declares_its_language(lang):
    for stem in NOTEBOOKS:
        catalog = editions.read(editions.catalog_path(stem, lang))
        assert dict(catalog.mime_headers)["Language"] == editions.FOLDERS[lang], stem
        assert len(catalog) > 5, stem


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_each_catalog_covers_its_notebooks_english_as_it_is_now(stem, lang):
    """Every English block has a reviewed translation with the same {glue} names, and nothing else is there."""
    assert editions.problems(stem, lang) == []


@pytest.mark.parametrize("lang", LANGS)
def test_entries_are_stored_unwrapped_and_flagged_only_for_glue(lang):
    """No hard line break inside a paragraph (the stray spaces between Chinese characters came from those), no
    format flag guessed from prose ("10% of", `{"n": 20}`), "glue" exactly where a block has {glue} roles."""
    stray = re.compile(r"[\u4e00-\u9fff] [\u4e00-\u9fff]")
    for stem in NOTEBOOKS:
        text = editions.catalog_path(stem, lang).read_text(encoding="utf-8")
        assert "python-format" not in text and "python-brace-format" not in text, stem
        for m in editions.read(editions.catalog_path(stem, lang)):
            if not m.id:
                continue
            at = f"{stem}.po:{m.lineno}"
            assert editions.blocks(m.id) == [m.id] and editions.blocks(m.string) == [m.string], at
            assert not stray.search(m.string), at
            assert ("glue" in m.flags) == bool(editions.glue_names(m.id)), at


# ------------------------------------------------------------------------------------------------ blocks
def test_blocks_are_unwrapped_by_the_rules():
    md = ("# Title\n\nOne paragraph\nover two lines.\n\n中文的句子\n換行了，再接 `code`\n和英文 word\n中文。\n\n"
          "* an item\n  that wraps\n* another\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Head\ntext right under\n\n"
          "```python\nx = 1\n\ny = 2\n```")
    assert editions.blocks(md) == [
        "# Title", "One paragraph over two lines.", "中文的句子換行了，再接 `code` 和英文 word 中文。",
        "* an item that wraps\n* another", "| a | b |\n|---|---|\n| 1 | 2 |", "## Head\ntext right under",
        "```python\nx = 1\n\ny = 2\n```"]
    assert editions.blocks("1. first\n2. second\n   continued") == ["1. first\n2. second continued"]
    assert editions.blocks("*emphasis* at the start\nof a line") == ["*emphasis* at the start of a line"]


# ------------------------------------------------------------------------ a changed English block, reviewed
def copy_of(tmp_path: Path, stem: str = STEM, lang: str = "zh-TW") -> Path:
    """A chapters/ folder holding one notebook's English source and its catalog."""
    root = tmp_path / "chapters"
    (root / "src").mkdir(parents=True)
    shutil.copy(CHAPTERS / "src" / f"{stem}.py", root / "src")
    po = editions.catalog_path(stem, lang, root)
    po.parent.mkdir(parents=True)
    shutil.copy(editions.catalog_path(stem, lang), po)
    return root


def render(root: Path, stem: str = STEM, lang: str = "zh-TW") -> list:
    cells = build.parse((root / "src" / f"{stem}.py").read_text(encoding="utf-8"))
    editions.render(cells, stem, lang, root)
    return cells


def test_changing_one_english_paragraph_fails_until_its_translation_is_reviewed(tmp_path):
    root = copy_of(tmp_path)
    src = root / "src" / f"{STEM}.py"
    assert editions.problems(STEM, "zh-TW", root) == [] and render(root)
    text = src.read_text(encoding="utf-8")
    src.write_text(text.replace("# The bound is loose here", "# The bound is generous here"), encoding="utf-8")
    found = editions.problems(STEM, "zh-TW", root)
    assert len(found) == 2, found
    assert "no entry for 'The bound is generous here" in found[0]
    assert re.match(rf"chapters/locale/zh_TW/{STEM}\.po:\d+: the English is not in {STEM}", found[1])
    with pytest.raises(editions.CatalogError, match=rf"{STEM}: chapters/locale/zh_TW/{STEM}\.po: no entry for "
                                                    r"'The bound is generous here"):
        render(root)

    # the translator merges (build.py --update): the old translation comes back fuzzy, with the old English beside it
    assert "1 fuzzy" in editions.update(STEM, "zh-TW", root)
    po = editions.catalog_path(STEM, "zh-TW", root)
    assert '#| msgid "The bound is loose here' in po.read_text(encoding="utf-8")
    assert "python-format" not in po.read_text(encoding="utf-8")  # Babel guesses it from "within 10% of"
    found = editions.problems(STEM, "zh-TW", root)
    assert len(found) == 1 and "fuzzy" in found[0] and "'The bound is generous here" in found[0]
    with pytest.raises(editions.CatalogError, match=rf"{STEM}\.po:\d+: fuzzy: 'The bound is generous"):
        render(root)

    # reviewed: the fuzzy mark removed (as Poedit does), and the notebook renders again
    catalog = editions.read(po)
    for m in catalog:
        m.flags.discard("fuzzy")
    editions.write(catalog, po)
    assert editions.problems(STEM, "zh-TW", root) == []
    assert "#|" not in po.read_text(encoding="utf-8") and render(root)


def test_update_adds_new_blocks_untranslated_and_keeps_vanished_ones_obsolete(tmp_path):
    root = copy_of(tmp_path)
    src = root / "src" / f"{STEM}.py"
    text = src.read_text(encoding="utf-8")
    gone = "# ## 3. The stall bound of chunked prefill\n#\n"
    assert gone in text
    src.write_text(text.replace(gone, "") + "\n# %% [markdown]\n# A brand new closing remark.\n", encoding="utf-8")
    assert "1 new (untranslated), 0 fuzzy, 1 obsolete" in editions.update(STEM, "zh-TW", root)
    po = editions.catalog_path(STEM, "zh-TW", root).read_text(encoding="utf-8")
    assert 'msgid "A brand new closing remark."\nmsgstr ""' in po
    assert '#~ msgid "## 3. The stall bound of chunked prefill"' in po
    line = po[:po.index('msgid "A brand')].count("\n") + 1
    assert editions.problems(STEM, "zh-TW", root) == [
        f"chapters/locale/zh_TW/{STEM}.po:{line}: untranslated: 'A brand new closing remark.'"]
    with pytest.raises(editions.CatalogError, match=r"untranslated: 'A brand new closing remark.' \(translate it\)"):
        render(root)


def test_a_block_repeated_with_another_translation_has_its_own_entry(tmp_path):
    """The n-th repeat of an English block may be translated differently under msgctxt "n"; --update keeps it."""
    root = copy_of(tmp_path)
    src = root / "src" / f"{STEM}.py"
    src.write_text(src.read_text(encoding="utf-8") + "\n# %% [markdown]\n# Read it honestly.\n\n"
                   "# %% [markdown]\n# Read it honestly.\n", encoding="utf-8")
    po = editions.catalog_path(STEM, "zh-TW", root)
    catalog = editions.read(po)
    catalog.add("Read it honestly.", "老實地讀。")
    catalog.add("Read it honestly.", "再老實地讀一次。", context="2")
    editions.write(catalog, po)
    assert editions.problems(STEM, "zh-TW", root) == []
    assert [c.source for c in render(root)[-2:]] == ["老實地讀。", "再老實地讀一次。"]
    assert "0 new (untranslated), 0 fuzzy, 0 obsolete" in editions.update(STEM, "zh-TW", root)
    assert [c.source for c in render(root)[-2:]] == ["老實地讀。", "再老實地讀一次。"]
    src.write_text(src.read_text(encoding="utf-8").rsplit("\n# %% [markdown]", 1)[0] + "\n", encoding="utf-8")
    assert "1 obsolete" in editions.update(STEM, "zh-TW", root)  # repeated once no longer: its own entry goes
    assert editions.problems(STEM, "zh-TW", root) == []


def test_a_translation_that_drops_or_invents_a_glue_name_is_named_by_file_and_line(tmp_path):
    root = copy_of(tmp_path)
    po = editions.catalog_path(STEM, "zh-TW", root)
    text = po.read_text(encoding="utf-8")
    assert text.count("（最差 {glue}`worst_step_pct`%）") == 1
    po.write_text(text.replace("（最差 {glue}`worst_step_pct`%）", "（最差 {glue}`worst_step`%）"), encoding="utf-8")
    [found] = editions.problems(STEM, "zh-TW", root)
    text = po.read_text(encoding="utf-8")
    line = text[:text.index("（最差 {glue}`worst_step`")].count("\n")  # the msgid's line, just above the msgstr
    assert found.startswith(f"chapters/locale/zh_TW/{STEM}.po:{line}: {{glue}} names "), found
    assert "'worst_step'" in found and "'worst_step_pct'" in found


HEAD_EN, HEAD_ZH = 'msgid "## 1. How the presets were sourced"', 'msgstr "## 1. 硬體預設組態的數字從哪裡來"'


@pytest.mark.parametrize("old, new, at, why", [
    (HEAD_ZH, HEAD_ZH[:-1], HEAD_ZH[:-1], "not a line of a PO file"),  # a lost closing quote (Babel drops the entry)
    (HEAD_EN, HEAD_EN.replace("msgid", "mgsid"), "mgsid", "not a line of a PO file"),
    (HEAD_ZH + "\n", "", HEAD_EN, "missing msgstr for msgid"),
])
def test_a_malformed_catalog_is_named_by_file_and_line(tmp_path, old, new, at, why):
    root = copy_of(tmp_path)
    po = editions.catalog_path(STEM, "zh-TW", root)
    text = po.read_text(encoding="utf-8")
    assert text.count(old) == 1
    broken = text.replace(old, new)
    po.write_text(broken, encoding="utf-8")
    line = broken[:broken.index(at)].count("\n") + 1
    with pytest.raises(editions.CatalogError, match=rf"^{re.escape(str(po))}:{line}: {why}"):
        editions.read(po)


def test_a_catalog_that_is_not_utf8_is_named_by_file_and_line(tmp_path):
    root = copy_of(tmp_path)
    po = editions.catalog_path(STEM, "zh-TW", root)
    data = po.read_bytes()
    at = data.index(HEAD_ZH.encode())
    po.write_bytes(data[:at] + b"\xff" + data[at:])
    line = data[:at].count(b"\n") + 1
    with pytest.raises(editions.CatalogError, match=rf"^{re.escape(str(po))}:{line}: not UTF-8"):
        editions.read(po)


def test_a_missing_catalog_stops_the_build_naming_the_notebook(tmp_path):
    root = copy_of(tmp_path)
    editions.catalog_path(STEM, "zh-TW", root).unlink()
    with pytest.raises(editions.CatalogError, match=rf"{STEM}: no catalog chapters/locale/zh_TW/{STEM}\.po"):
        render(root)


# --------------------------------------------------------------------------------------- code comments
CELL = '''# NBVAL_CHECK_OUTPUT
# the first line of a comment
#   that goes on here
x = run("static", n=2)  # the policy, "# not a comment" in a string stays
s = "# a string"
# words: ok (a location)
plt.legend(loc="upper left")  # words: ok
if x:
    # indented, its own entry
    y = 1  # noqa: E501
### BEGIN SOLUTION
z = 2
### END SOLUTION'''


def test_the_comments_of_a_code_cell_are_found_by_the_rules():
    """A run of whole-line comments at one column is one entry; trailing ones each; markers never."""
    assert [(a, b, col, text, trailing) for a, b, col, text, trailing in editions.comments(CELL)] == [
        (1, 2, 0, "the first line of a comment that goes on here", False),
        (3, 3, 24, 'the policy, "# not a comment" in a string stays', True),
        (5, 5, 0, "words: ok (a location)", False),
        (8, 8, 4, "indented, its own entry", False)]
    zh = {"the first line of a comment that goes on here": "一段註解的第一行與它的後續",
          'the policy, "# not a comment" in a string stays': "策略",
          "words: ok (a location)": "words: ok（位置參數）", "indented, its own entry": "縮排的註解"}
    out = editions.swap_comments(CELL, zh.__getitem__)
    assert out.split("\n") == [
        "# NBVAL_CHECK_OUTPUT", "# 一段註解的第一行與它的後續", 'x = run("static", n=2)  # 策略',
        's = "# a string"', "# words: ok（位置參數）", 'plt.legend(loc="upper left")  # words: ok', "if x:",
        "    # 縮排的註解", "    y = 1  # noqa: E501", "### BEGIN SOLUTION", "z = 2", "### END SOLUTION"]
    long = editions.swap_comments("# a long one\nx = 1", lambda text: "很長的註解" * 30)
    lines = long.split("\n")
    assert len(lines) > 2 and lines[-1] == "x = 1" and all(ln.startswith("# ") for ln in lines[:-1])
    assert "".join(ln[2:] for ln in lines[:-1]) == "很長的註解" * 30  # wrapped between characters, nothing lost
    spans = editions.swap_comments("# a long one\nx = 1", lambda text: "很長的註解" * 17 + "執行 `python a/b.py --x 1` 即可")
    assert "`python a/b.py --x 1`" in spans  # a code span stays on one line


def code_tokens(src: str) -> list[tuple[int, str, tuple[int, int]]]:
    """The tokens of a code cell but its comments and blank lines, each with its place in the line (line numbers
    left out: a wrapped comment takes more lines)."""
    text = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.split("\n"))
    return [(t.type, t.string, t.start[1] if t.type not in (tokenize.NEWLINE, tokenize.ENDMARKER) else None)
            for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type not in (tokenize.COMMENT, tokenize.NL)]


def test_the_docstrings_of_a_code_cell_are_found_and_swapped_by_the_rules():
    """A docstring is the first statement of a module, class or function when it is a plain string literal: its
    text (lines joined) is the entry; the edition swaps the text between the quotes, wrapped at its column."""
    cell = ('"""The cell."""\nimport math\n\n\ndef f(batch):\n    """Wall time of a step with `batch` sequences in\n'
            '    flight, the fastest."""\n    x = "not a docstring"\n    return x  # a comment\n\n\n'
            'class A:\n    r"""Raw: left as it is."""\n\n    def g(self): "One quote."; return 1')
    assert [(a, b, col, q, text) for a, b, col, _, q, text in editions.docstrings(cell)] == [
        (0, 0, 0, '"""', "The cell."),
        (5, 6, 4, '"""', "Wall time of a step with `batch` sequences in flight, the fastest."),
        (14, 14, 17, '"', "One quote.")]
    zh = {"The cell.": "這個儲存格。", "Wall time of a step with `batch` sequences in flight, the fastest.": "很長的說明" * 25,
          "One quote.": "一個引號。"}
    out = editions.swap_docstrings(cell, zh.__getitem__).split("\n")
    assert out[0] == '"""這個儲存格。"""' and out[-1] == '    def g(self): "一個引號。"; return 1'
    body = out[5:out.index('    x = "not a docstring"')]
    assert len(body) > 1 and body[0].startswith('    """') and body[-1].endswith('"""')
    assert all(ln.startswith("    ") for ln in body[1:])  # continued at the docstring's column
    assert "".join(ln.strip().strip('"') for ln in body) == "很長的說明" * 25  # wrapped, nothing lost
    assert 'r"""Raw: left as it is."""' in "\n".join(out)  # a prefixed string is not swapped
    assert editions.docstrings('def f(:\n    "x"') == []  # a cell that does not parse has none


def without_docstrings(src: str) -> str:
    """A code cell with every docstring's text emptied (the one thing besides comments an edition changes)."""
    return editions.swap_docstrings(src, lambda text: "")


@pytest.mark.parametrize("lang", LANGS)
def test_the_edition_changes_only_the_comments_and_docstrings_of_the_code(lang):
    """Every code cell of an edition is its English one but for the comments' and docstrings' text (nbval checks
    the same numbers), with the English markers; checked on every notebook whose catalog is complete."""
    for stem in [s for s in NOTEBOOKS if not editions.problems(s, lang)]:  # the others fail the test above
        en = editions.english_code(stem)
        cells = [build.nbformat.v4.new_code_cell(src) for src in en]
        editions.render(cells, stem, lang)
        for src, cell in zip(en, cells):
            assert code_tokens(without_docstrings(cell.source)) == code_tokens(without_docstrings(src)), stem
            assert len(editions.docstrings(cell.source)) == len(editions.docstrings(src)), stem
            assert not set(editions.docstring_ids([cell.source])) & set(editions.docstring_ids([src])), stem
            markers = [ln for ln in src.split("\n") if editions.MARKERS.fullmatch(ln.strip().lstrip("#").strip())]
            assert [ln for ln in cell.source.split("\n") if ln in markers] == markers, stem


def test_a_changed_docstring_fails_until_its_translation_is_reviewed(tmp_path):
    root = copy_of(tmp_path)
    src = root / "src" / f"{STEM}.py"
    text = src.read_text(encoding="utf-8")
    old = "A source line wrapped for reading at 92 columns"
    assert old in text and editions.problems(STEM, "zh-TW", root) == []
    src.write_text(text.replace(old, "A source line wrapped for reading at 92 columns or fewer"), encoding="utf-8")
    found = editions.problems(STEM, "zh-TW", root)
    assert any("no entry for the docstring 'A source line wrapped for reading at 92" in f for f in found), found
    with pytest.raises(editions.CatalogError, match=r"no entry for the docstring 'A source line wrapped"):
        render(root)
    assert "1 fuzzy" in editions.update(STEM, "zh-TW", root)
    po = editions.catalog_path(STEM, "zh-TW", root)
    assert 'msgctxt "docstring"\nmsgid "A source line wrapped for reading at 92 columns or fewer' in po.read_text(
        encoding="utf-8")
    with pytest.raises(editions.CatalogError, match=r"fuzzy: the docstring 'A source line wrapped"):
        render(root)


def test_a_changed_comment_fails_until_its_translation_is_reviewed(tmp_path):
    root = copy_of(tmp_path)
    src = root / "src" / f"{STEM}.py"
    text = src.read_text(encoding="utf-8")
    old = "# the goals the table is held to (tools/validate.py)"
    assert old in text and editions.problems(STEM, "zh-TW", root) == []
    src.write_text(text.replace(old, "# the goals this table is held to (tools/validate.py)"), encoding="utf-8")
    found = editions.problems(STEM, "zh-TW", root)
    assert any("no entry for the comment 'the goals this table is held to" in f for f in found), found
    assert any("the English is not in" in f and "the goals the table" in f for f in found), found
    with pytest.raises(editions.CatalogError, match=r"no entry for the comment 'the goals this table is held"):
        render(root)
    assert "1 fuzzy" in editions.update(STEM, "zh-TW", root)
    po = editions.catalog_path(STEM, "zh-TW", root)
    assert 'msgctxt "comment"\nmsgid "the goals this table is held to' in po.read_text(encoding="utf-8")
    with pytest.raises(editions.CatalogError, match=r"fuzzy: the comment 'the goals this table"):
        render(root)
