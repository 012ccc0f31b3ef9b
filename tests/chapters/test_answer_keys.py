"""The teacher's answer keys ask exactly the questions their notebook ends with, in both editions.

Every lesson that ends with a `## Questions` block (a numbered list) has two keys in chapters/instructors/:
answers-7.x.md, whose bold headings `**N. question**` (a heading may wrap over lines) are the English list's items
(chapters/src/<stem>.py), and answers-7.x.zh-TW.md, whose headings are the items of that block's 繁體中文 in the
notebook's catalog (chapters/locale/zh_TW/<stem>.po): the same number of questions, in the same order, the same
text (whitespace aside), each followed by an answer. A question with a {glue}`name` role is compared with the
question as the built notebook prints it (chapters/<stem>.ipynb, chapters/zh-TW/<stem>.ipynb), the value filled
in. A key without such a lesson fails, and so does such a lesson without its two keys.

    python -m pytest -q -n 0 tests/chapters/test_answer_keys.py
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
INSTRUCTORS = CHAPTERS / "instructors"
sys.path.insert(0, str(CHAPTERS))
try:
    import build  # noqa: F401  (editions.english_cells imports build's parser)
    import editions
finally:
    sys.path.remove(str(CHAPTERS))

HEADING = "## Questions"
ITEM = re.compile(r"(\d+)\.\s+(.*)")  # a numbered item of an unwrapped list block: one line each
KEY_QUESTION = re.compile(r"^\*\*(\d+)\.\s(.+?)\*\*", re.M | re.S)  # a key's heading, possibly over lines
SPACE_IN_CJK = re.compile(rf"(?<={editions.CJK.pattern})\s+(?={editions.CJK.pattern})")
EDITIONS = ["en"] + sorted(editions.FOLDERS)


def norm(text: str) -> str:
    """Whitespace-normalised: runs of white space are one space, none between two CJK characters."""
    return SPACE_IN_CJK.sub("", " ".join(text.split()))


def key_path(stem: str, lang: str) -> Path:
    number = stem.split("-")[0]
    return INSTRUCTORS / (f"answers-{number}.md" if lang == "en" else f"answers-{number}.{lang}.md")


def question_block(stem: str) -> tuple[str, str | None] | None:
    """The catalog key (msgid, msgctxt) of the block after a lesson's `## Questions` heading; None without one."""
    row = [k for cell in editions.keys(editions.english_cells(stem)) for k in cell]
    for i, (block, _) in enumerate(row):
        if block.strip() == HEADING:
            assert i + 1 < len(row), f"{stem}: nothing after its {HEADING!r} heading"
            return row[i + 1]
    return None


def items(block: str, where: str) -> list[str]:
    """The questions of a numbered list block, numbered 1, 2, 3, ... in order."""
    found = [ITEM.fullmatch(line.strip()) for line in block.split("\n") if line.strip()]
    assert found and all(found), f"{where}: the Questions block is not a numbered list: {block[:80]!r}"
    assert [int(m[1]) for m in found] == list(range(1, len(found) + 1)), f"{where}: numbered out of order"
    return [m[2] for m in found]


LESSONS = [stem for stem in editions.notebooks() if (CHAPTERS / "src" / f"{stem}.py").exists()]
WITH_QUESTIONS = [stem for stem in LESSONS if question_block(stem)]


def translation(stem: str, lang: str, msgid: str, ctxt: str | None) -> str:
    path = editions.catalog_path(stem, lang)
    m = editions.lookup(editions.read(path), msgid, ctxt)
    assert m is not None and m.string and not m.fuzzy, \
        f"{path.relative_to(CHAPTERS.parent)}: no reviewed translation of {editions.first_words(msgid)!r}"
    return m.string


def printed(stem: str, lang: str) -> list[str]:
    """The questions as the built notebook prints them ({glue} filled): the list after its Questions heading."""
    path = CHAPTERS / (f"{stem}.ipynb" if lang == "en" else f"{lang}/{stem}.ipynb")
    heading = HEADING if lang == "en" else translation(stem, lang, HEADING, None)
    nb = json.loads(path.read_text(encoding="utf-8"))
    row = [b for c in nb["cells"] if c["cell_type"] == "markdown" for b in editions.blocks("".join(c["source"]))]
    assert heading in row and row.index(heading) + 1 < len(row), f"{path.name}: no {heading!r} heading"
    return items(row[row.index(heading) + 1], str(path.relative_to(CHAPTERS.parent)))


def expected(stem: str, lang: str) -> list[str]:
    """The notebook's questions in an edition: the English list, or its translation in the edition's catalog; a
    question with a {glue} role as the built notebook prints it (which must fit the text around the role)."""
    msgid, ctxt = question_block(stem)
    block = msgid if lang == "en" else translation(stem, lang, msgid, ctxt)
    questions = items(block, f"{stem} ({lang})")
    if not any(editions.glue_names(q) for q in questions):
        return questions
    built = printed(stem, lang)
    assert len(built) == len(questions), f"{stem} ({lang}): the built notebook is stale (rebuild it)"
    out = []
    for q, b in zip(questions, built):
        pattern = "(.+?)".join(map(re.escape, norm(editions.GLUE.sub("\0", q)).split("\0")))
        assert re.fullmatch(pattern, norm(b)), \
            f"{stem} ({lang}): the built notebook prints {b!r}, not {q!r} (rebuild it)"
        out.append(b)
    return out


def key_questions(path: Path) -> list[tuple[int, str, str]]:
    """A key's (number, question, answer) in order; the answer is the text up to the next numbered heading."""
    text = path.read_text(encoding="utf-8")
    found = list(KEY_QUESTION.finditer(text))
    ends = [m.start() for m in found[1:]] + [len(text)]
    return [(int(m[1]), m[2], text[m.end():end]) for m, end in zip(found, ends)]


# ------------------------------------------------------------------------------------------------- tests
def test_the_lessons_with_questions_are_found():
    numbers = [stem.split("-")[0] for stem in WITH_QUESTIONS]
    assert {"7.0", "7.1", "7.2", "7.3", "7.4", "7.5"} <= set(numbers) and "7.6" not in numbers  # 7.6: evidence


@pytest.mark.parametrize("lang", EDITIONS)
def test_every_key_has_a_lesson_with_questions_and_every_such_lesson_a_key(lang):
    keys = sorted(p.name for p in INSTRUCTORS.glob("answers-*.md")
                  if (lang == "en") == (p.name.count(".") == 2))  # answers-7.1.md vs answers-7.1.zh-TW.md
    assert keys == sorted(key_path(stem, lang).name for stem in WITH_QUESTIONS)


@pytest.mark.parametrize("lang", EDITIONS)
@pytest.mark.parametrize("stem", WITH_QUESTIONS)
def test_the_key_answers_the_notebooks_questions_in_order(stem, lang):
    path = key_path(stem, lang)
    assert path.exists(), f"{stem} has questions but no answer key {path.name}"
    want = [norm(q) for q in expected(stem, lang)]
    have = key_questions(path)
    assert [n for n, _, _ in have] == list(range(1, len(have) + 1)), f"{path.name}: numbered out of order"
    assert [norm(q) for _, q, _ in have] == want, path.name
    for n, _, answer in have:
        assert answer.strip(), f"{path.name}: question {n} has no answer"


def test_a_mismatch_fails(tmp_path):
    """The comparison above catches a reworded, a dropped and a wrapped-but-equal question."""
    stem = WITH_QUESTIONS[0]
    want = [norm(q) for q in expected(stem, "en")]
    text = key_path(stem, "en").read_text(encoding="utf-8")
    first = key_questions(key_path(stem, "en"))[0][1]
    wrapped = tmp_path / "wrapped.md"
    wrapped.write_text(text.replace(first, first.replace(" ", "\n", 1)), encoding="utf-8")
    assert [norm(q) for _, q, _ in key_questions(wrapped)] == want
    reworded = tmp_path / "reworded.md"
    reworded.write_text(text.replace(first, first + " Explain."), encoding="utf-8")
    assert [norm(q) for _, q, _ in key_questions(reworded)] != want
    last = key_questions(key_path(stem, "en"))[-1][1]
    dropped = tmp_path / "dropped.md"
    dropped.write_text(text[:text.index(f"**{len(want)}. {last}")], encoding="utf-8")
    assert len(key_questions(dropped)) == len(want) - 1
