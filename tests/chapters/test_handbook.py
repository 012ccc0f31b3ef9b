"""The teacher's pack cannot go stale: its per-notebook figures are the built notebooks', and every lesson is in it.

chapters/handbook.py counts the figures (prose, code cells, predictions, closing questions, minutes) in the built
notebooks of each edition and build.py writes them into chapters/instructors/README.md and README.zh-TW.md. Here:
each handbook holds exactly the table the notebooks give now (a notebook rebuilt with more prose or another
question fails this until `python chapters/handbook.py --write`), the counting rules give the numbers counted by
hand on a small notebook, and every lesson (7.7 too) is in the handbooks, in chapters/README.md's tables and in
the README's reading order, in both languages.

    python -m pytest -q -n 0 tests/chapters/test_handbook.py
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ROOT / "chapters"
sys.path.insert(0, str(CHAPTERS))
try:
    import handbook
finally:
    sys.path.remove(str(CHAPTERS))

LESSONS = handbook.lessons()


@pytest.mark.parametrize("lang", list(handbook.HANDBOOKS))
def test_each_handbook_holds_the_figures_of_the_built_notebooks(lang):
    assert handbook.written(lang) == handbook.table(lang), (
        f"{handbook.HANDBOOKS[lang].relative_to(ROOT)}: its table is not what the built notebooks hold; "
        "run python chapters/handbook.py --write (build.py does it after building lessons)")


def _notebook(texts: list[tuple[str, str]]):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(t) if kind == "md" else nbformat.v4.new_code_cell(t)
                for kind, t in texts]
    return nb


def test_the_counts_are_those_counted_by_hand():
    english = _notebook([
        ("md", "# 7.9 A title\n\nOne two three, four.\n\n```python\nnot = counted(at_all)\n```"),  # 4 + 4 words
        ("code", "p_one = Predict(t('x'), unit='ms')"),
        ("code", "p_two = Choose(t('y'), {1: '1'})\nprint(p_two)"),
        ("code", "plain = 1"),
        ("md", "## Questions\n\n1. Why?\n2. Why not?\n3. When?"),  # 2 + 2 + 3 + 2 = 9 words
        ("md", "## Appendix A: more\n\nfive six seven eight nine"),  # 4 + 5 words, after the main path
    ])
    questions = handbook.closing_questions(english.cells)
    assert questions == 3
    f = handbook.figures(english, "en", questions)
    assert (f["prose"], f["main"], f["cells"], f["predictions"]) == (26, 17, 3, 2)
    # 26 words / 150 + 3 cells x 0.5 + 2 predictions x 2 = 5.67 min, up to the next five
    assert f["minutes"] == 10
    chinese = _notebook([
        ("md", "# 7.9 一個標題\n\n一二三，四 token 五。"),  # 一個標題一二三四五: 9 characters, no Latin, no 。
        ("md", "## 附錄：再多一點\n\n六七"),  # 附錄再多一點六七: 8, after the main path
    ])
    f = handbook.figures(chinese, "zh-TW", 0)
    assert (f["prose"], f["main"], f["cells"], f["predictions"]) == (17, 9, 0, 0)
    assert f["minutes"] == 5  # 17 / 250 of a minute, rounded up


def test_a_question_list_in_the_next_cell_is_counted():
    nb = _notebook([("md", "## Questions"), ("md", "1. One?\n2. Two?")])
    assert handbook.closing_questions(nb.cells) == 2
    assert handbook.closing_questions(_notebook([("md", "## Question time\n\n1. No.")]).cells) == 0


@pytest.mark.parametrize("lang", list(handbook.HANDBOOKS))
def test_every_lesson_is_in_the_handbook(lang):
    rows = [line for line in handbook.written(lang).splitlines() if re.match(r"\| 7\.\d ", line)]
    assert [row.split()[1] for row in rows] == [stem.split("-")[0] for stem in LESSONS]
    assert "7.7" in [row.split()[1] for row in rows]


def test_chapters_readme_lists_every_lesson_in_both_languages():
    text = (CHAPTERS / "README.md").read_text(encoding="utf-8")
    for stem in LESSONS:
        assert f"](zh-TW/{stem}.ipynb)" in text, f"chapters/README.md: the 繁體中文 table has no {stem}"
        assert f"]({stem}.ipynb)" in text, f"chapters/README.md: the English table has no {stem}"


def test_the_readmes_reading_order_goes_to_the_last_lesson_in_both_languages():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    part = text[text.index("## Where to start reading"):]
    part = part[:part.index("\n## ", 4)]
    last = LESSONS[-1].split("-")[0]
    english = next(line for line in part.split("\n- ") if line.startswith("**English**"))
    chinese = next(line for line in part.split("\n- ") if line.startswith("**繁體中文**"))
    assert re.search(rf"then 7\.1 to {re.escape(last)} in order", " ".join(english.split())), english
    assert f"依序讀到 {last}" in " ".join(chinese.split()), chinese
