"""The teacher's handbook's per-notebook figures, counted from the built notebooks (both editions).

    python chapters/handbook.py            # print the two tables
    python chapters/handbook.py --write    # put them in instructors/README.md and README.zh-TW.md

build.py runs `--write` after it has built lessons, and tests/chapters/test_handbook.py fails when a handbook's
table is not the one the built notebooks give, so the handbook cannot go stale. Each table sits between the two
MARKERS lines; the words around it are the handbook's own.

What is counted, in each edition's built notebook (the numbers glued in, as a learner reads them):
  prose      the markdown cells with their code fences left out: English words (what white space separates),
             or, in the 繁體中文 edition, Chinese characters (the English terms and the numbers in it left out);
             the main path is the prose before the first cell that opens with an appendix heading
  code cells every code cell, the folded ones included
  predictions  the code cells that ask one: a `Predict(` or `Choose(` box
  questions  the items of the numbered list after the `## Questions` heading (the same in both editions)
  estimate   prose at READING[lang] a minute, half a minute a code cell, two minutes a prediction, rounded up to
             the next five minutes (closing questions are counted apart: discussed in class or not)
"""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
HANDBOOKS = {"en": HERE / "instructors" / "README.md", "zh-TW": HERE / "instructors" / "README.zh-TW.md"}
BUILT = {"en": HERE, "zh-TW": HERE / "zh-TW"}
MARKERS = ("<!-- figures: chapters/handbook.py writes this table from the built notebooks -->",
           "<!-- end of figures -->")
READING = {"en": 150, "zh-TW": 250}  # words, or Chinese characters, read a minute: a study pace for technical text
CELL_MINUTES, PREDICTION_MINUTES, ROUND_TO = 0.5, 2, 5
MAIN_PATH = ("7.0", "7.1", "7.2", "7.3", "7.4")  # what a class does in the lab; 7.5-7.7 are optional reading

FENCE = re.compile(r"^\s*(```|~~~).*?^\s*\1[^\n]*$", re.M | re.S)
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")  # Chinese characters, punctuation not included
APPENDIX = re.compile(r"#{1,6}\s+(Appendix|附錄)")  # a cell that opens a notebook's appendix (not a title's word)
ASKS = re.compile(r"\b(Predict|Choose)\(")
QUESTIONS = re.compile(r"^#{1,6}\s+Questions\s*$", re.M)

NAMES = {  # how the handbooks name each lesson
    "7.0": ("Why batching", "為什麼要批次處理"),
    "7.1": ("Static batching", "靜態批次"),
    "7.2": ("Continuous batching", "連續批次"),
    "7.3": ("Chunked prefill", "Chunked prefill"),
    "7.4": ("The KV bill", "KV 快取的帳單"),
    "7.5": ("Figures you know (appendix)", "你看過的那些圖（附錄）"),
    "7.6": ("Evidence (appendix)", "證據（附錄）"),
    "7.7": ("Reading the engine (for engineers)", "讀懂引擎（給工程師）"),
}
HEAD = {
    "en": ["| notebook | prose (words): all (main path) | code cells | predictions | closing questions | estimate |",
           "|---|---|---|---|---|---|"],
    "zh-TW": ["| 筆記本 | 說明文字（中文字數）：全部（主線） | 程式碼儲存格 | 預測 | 章末問題 | 估計 |",
              "|---|---|---|---|---|---|"],
}
TOTAL = {
    "en": "7.0–7.4, what a class does in the lab: about {minutes} min, plus two minutes for each of their {questions} "
          "closing questions discussed in class.",
    "zh-TW": "7.0–7.4 是課堂上實作的部分：約 {minutes} 分鐘，在課堂上討論章末問題的話，它們的 {questions} 題每題再加兩分鐘。",
}
MINUTES = {"en": "{} min", "zh-TW": "{} 分鐘"}


def prose_amount(markdown: str, lang: str) -> int:
    """Words (English) or Chinese characters (zh-TW) of a markdown cell, its code fences left out."""
    text = FENCE.sub("", markdown)
    return len(text.split()) if lang == "en" else len(HAN.findall(text))


def closing_questions(cells) -> int:
    """The items of the numbered list after the English `## Questions` heading (0 without one)."""
    for i, c in enumerate(cells):
        if c.cell_type == "markdown" and QUESTIONS.search(c.source):
            rest = QUESTIONS.split(c.source, 1)[1]
            if not rest.strip():  # the list is the next cell
                rest = next(n.source for n in cells[i + 1:] if n.cell_type == "markdown")
            return len(re.findall(r"^\d+\.\s", rest, re.M))
    return 0


def figures(nb, lang: str, questions: int) -> dict:
    """One built notebook's figures (questions counted in the English edition: the same list in both)."""
    prose = main = cells = asks = 0
    in_main = True
    for c in nb.cells:
        if c.cell_type == "code":
            cells += 1
            asks += bool(ASKS.search(c.source))
        elif c.cell_type == "markdown":
            in_main = in_main and not APPENDIX.match(c.source.lstrip())
            n = prose_amount(c.source, lang)
            prose += n
            main += n if in_main else 0
    raw = prose / READING[lang] + CELL_MINUTES * cells + PREDICTION_MINUTES * asks
    return {"prose": prose, "main": main, "cells": cells, "predictions": asks, "questions": questions,
            "minutes": ROUND_TO * math.ceil(raw / ROUND_TO)}


def lessons() -> list[str]:
    return sorted(p.stem for p in (HERE / "src").glob("7.*.py"))


def all_figures(lang: str) -> dict[str, dict]:
    out = {}
    for stem in lessons():
        english = nbformat.read(BUILT["en"] / f"{stem}.ipynb", as_version=4)
        nb = english if lang == "en" else nbformat.read(BUILT[lang] / f"{stem}.ipynb", as_version=4)
        out[stem] = figures(nb, lang, closing_questions(english.cells))
    return out


def table(lang: str) -> str:
    """The handbook's table in an edition's language, and the line that adds up the main path."""
    zh = lang != "en"
    rows = list(HEAD[lang])
    found = all_figures(lang)
    for stem, f in found.items():
        number = stem.split("-")[0]
        prose = f"{f['prose']:,}" + ("" if f["main"] == f["prose"] else
                                     (f"（{f['main']:,}）" if zh else f" ({f['main']:,})"))
        rows.append(f"| {number} {NAMES[number][zh]} | {prose} | {f['cells']} | {f['predictions']} | "
                    f"{f['questions']} | {MINUTES[lang].format(f['minutes'])} |")
    main = [f for stem, f in found.items() if stem.split("-")[0] in MAIN_PATH]
    total = TOTAL[lang].format(minutes=sum(f["minutes"] for f in main), questions=sum(f["questions"] for f in main))
    return "\n".join(rows) + "\n\n" + total


def region(text: str) -> tuple[int, int]:
    """Where the generated part of a handbook starts and ends (between MARKERS)."""
    start, end = text.find(MARKERS[0]), text.find(MARKERS[1])
    if start < 0 or end < start:
        raise SystemExit(f"handbook.py: a handbook lost its markers {MARKERS}")
    return start + len(MARKERS[0]), end


def written(lang: str) -> str:
    """The table a handbook holds now."""
    text = HANDBOOKS[lang].read_text(encoding="utf-8")
    start, end = region(text)
    return text[start:end].strip()


def write() -> list[str]:
    """Put each edition's table in its handbook; the handbooks changed."""
    changed = []
    for lang, path in HANDBOOKS.items():
        text = path.read_text(encoding="utf-8")
        start, end = region(text)
        new = text[:start] + "\n" + table(lang) + "\n" + text[end:]
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(str(path.relative_to(HERE.parent)))
    return changed


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        print("\n".join(f"wrote {p}" for p in write()) or "the handbooks' tables are up to date")
    else:
        for lang in HANDBOOKS:
            print(table(lang) + "\n")
