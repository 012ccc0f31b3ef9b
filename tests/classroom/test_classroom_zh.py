"""The 繁體中文 exercises: the same notebooks (cell ids, metadata, code) in other words, checked and graded alike.

chapters/zh-TW/solutions/ is built from the English solutions by chapters/build.py --lang zh-TW (markdown swapped,
the setup line picks zh-TW); chapters/zh-TW/exercises/ is generated from it. Their checks speak Chinese in a kernel,
in the self-check and in the grader (--lang zh-TW); a grader in English grades the same notebook the same way.
"""
from __future__ import annotations

import io
import itertools
import os
import re
import tokenize
import subprocess
import sys
from pathlib import Path

import pytest

import tinyserve
from tinyserve.classroom import checks, harness
from tinyserve.classroom.generate import exercise_text
from tinyserve.classroom.runner import execute

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[2]
EN_SOL, EN_EX = ROOT / "chapters" / "solutions", ROOT / "chapters" / "exercises"
ZH_SOL, ZH_EX = ROOT / "chapters" / "zh-TW" / "solutions", ROOT / "chapters" / "zh-TW" / "exercises"
NAMES = sorted(p.name for p in EN_SOL.glob("*.ipynb"))
CJK = re.compile(r"[\u4e00-\u9fff]")
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")


@pytest.fixture(autouse=True)
def english_after(monkeypatch, torch_one_thread):
    """Fixed seeds (1, 2, ...), and the language back to English after each test."""
    counter = itertools.count(1)
    monkeypatch.setattr(harness, "fresh_seed", lambda: next(counter))
    yield
    tinyserve.set_language("en")


def read(path: Path):
    return nbformat.read(path, as_version=4)


ZH_STUB = tinyserve.lang.t("classroom.code_stub", "zh-TW").split("\n")
EN_STUB = tinyserve.lang.t("classroom.code_stub", "en").split("\n")


def comments(source: str) -> list[str]:
    """The comments of a code cell's source, in order; a run of whole-line comments on consecutive lines is one
    (the build wraps a long translated comment over several lines)."""
    out, last = [], None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        row, col = tok.start
        whole = not tok.line[:col].strip()
        marker = tok.string.strip("# ").split(" ")[0] in ("BEGIN", "END")
        if whole and not marker and last is not None and last[0] == row - 1 and out and not last[1]:
            out[-1] += " " + tok.string.lstrip("# ")
        else:
            out.append(tok.string)
        last = (row, marker or not whole)
    return out


def code_only(source: str) -> str:
    """The source without its comments (a comment-only line dropped), the zh-TW stub's message read as the English."""
    lines = source.split("\n")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col].rstrip()
    code = "\n".join(ln for ln in lines if ln.strip())
    return code.replace(ZH_STUB[1].strip(), EN_STUB[1].strip())


# ------------------------------------------------------------------------------------------- the notebooks
@pytest.mark.parametrize("name", NAMES)
def test_zh_tw_notebooks_are_the_english_ones_in_other_words(name):
    for en, zh in ((read(EN_SOL / name), read(ZH_SOL / name)), (read(EN_EX / name), read(ZH_EX / name))):
        assert [c.get("id") for c in zh.cells] == [c.get("id") for c in en.cells]
        assert [c.cell_type for c in zh.cells] == [c.cell_type for c in en.cells]
        assert [c.metadata for c in zh.cells] == [c.metadata for c in en.cells]  # nbgrader's ids and points
        for e, z in zip(en.cells, zh.cells):
            if e.cell_type == "code":  # the same code, but for the one setup line and the comments' language
                assert code_only(z.source) == code_only(e.source.replace('set_language("en")', 'set_language("zh-TW")')), e.get("id")
            elif e.source != "YOUR ANSWER HERE":
                assert CJK.search(z.source), f"{name} {e.get('id')}: not translated"
        setups = [c for c in zh.cells if 'tinyserve.set_language("zh-TW")' in c.source]
        assert len(setups) == 1 and setups[0].get("id") == "setup"


@pytest.mark.parametrize("name", NAMES)
def test_zh_tw_exercises_are_generated_from_the_zh_tw_solutions(name):
    assert (ZH_EX / name).read_text(encoding="utf-8") == exercise_text(ZH_SOL / name), \
        "run: python chapters/build.py --lang zh-TW 7.1-exercises 7.2-exercises 7.3-exercises 7.4-exercises"
    rubric = [c for c in read(ZH_EX / name).cells if "open" in c.metadata.get("tags", [])]
    assert all(c.source == "在這裡寫下你的答案。" for c in rubric)


@pytest.mark.parametrize("folder", [ZH_SOL, ZH_EX], ids=["solutions", "exercises"])
def test_zh_tw_exercise_code_reads_chinese(folder):
    """What a learner reads in a code cell of the zh-TW edition is Chinese: every comment (the graded cells' "do not
    edit" line, the prediction and sweep prompts, the stub) and the stub's message; nbgrader's own markers stay."""
    for name in NAMES:
        for c in read(folder / name).cells:
            if c.cell_type != "code":
                continue
            for com in comments(c.source):
                if com.strip("# ").split(" ")[0] in ("BEGIN", "END"):
                    continue  # nbgrader's delimiters (solutions only), removed from what learners get
                assert CJK.search(com), f"{folder.name}/{name} {c.get('id')}: English comment {com!r}"
            assert "write your answer here" not in c.source and "YOUR CODE HERE" not in c.source, c.get("id")
            if "NotImplementedError" in c.source:
                assert ZH_STUB[1].strip() in c.source, c.get("id")


# ------------------------------------------------------------------------- checks, in a kernel's language
@pytest.mark.parametrize("name", NAMES)
def test_zh_tw_solutions_pass_and_blank_exercises_are_not_attempted_in_chinese(name):
    passed = execute(read(ZH_SOL / name))
    assert passed and all(o.status == "passed" for o in passed.values()), passed
    blank = execute(read(ZH_EX / name))
    assert blank and all(o.status == "blank" and "還沒寫" in o.message for o in blank.values()), blank


def test_a_wrong_answer_fails_with_a_chinese_message_in_a_zh_tw_kernel():
    tinyserve.set_language("zh-TW")
    with pytest.raises(AssertionError) as e:
        checks.padding_tokens(lambda lens: 0)
    msg = str(e.value)
    assert "一個靜態批次" in msg and "你的 padding_tokens 回傳 0" in msg
    tinyserve.set_language("en")
    with pytest.raises(AssertionError) as e:
        checks.padding_tokens(lambda lens: 0)
    assert "your padding_tokens returned 0" in str(e.value) and not CJK.search(str(e.value))


def test_check_here_in_a_zh_tw_kernel(capsys):
    from tinyserve.classroom.check import check_here

    tinyserve.set_language("zh-TW")
    check_here({"slabs_that_fit": lambda m, n, b: m // (n * b)}, "7.4")
    out = capsys.readouterr().out.splitlines()
    assert out == ["✓ 7.4 (l) 放得下幾段 slab：正確", "· 7.4 (m) 一個序列佔的 KV 位元組：還沒作答",
                   "· 7.4 (n) slab 配置器：還沒作答", "3 題答對 1 題（5 分拿到 1 分）；2 題還沒作答"]


def wrong_kv(src: Path, dest: Path) -> Path:
    """The notebook with a KV count that forgets the prompt (m-answer)."""
    nb = read(src)
    next(c for c in nb.cells if c.get("id") == "m-answer").source = \
        "def kv_bytes_used(prompt_len, generated, bytes_per_token):\n    return generated * bytes_per_token"
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)
    return dest


def test_self_check_command_speaks_the_notebooks_language(tmp_path):
    mine = wrong_kv(ZH_SOL / "7.4-exercises.ipynb", tmp_path / "mine.ipynb")
    cmd = [sys.executable, "-m", "tinyserve.classroom.check", str(mine)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    lines = r.stdout.splitlines()
    assert r.returncode == 1, r.stdout + r.stderr
    assert lines[0].startswith("正在檢查") and "✓ 7.4 (l) 放得下幾段 slab：正確" in lines
    assert any(ln.startswith("✗ 7.4 (m) 一個序列佔的 KV 位元組：錯誤——") and "你的 kv_bytes_used" in ln for ln in lines)
    assert lines[-1] == "3 題答對 2 題（5 分拿到 4 分）；0 題還沒作答"
    r = subprocess.run(cmd + ["--lang", "en"], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 1 and not CJK.search(r.stdout), r.stdout  # the checks too, whatever the notebook set
    assert "✗ 7.4 (m) KV bytes a sequence holds: wrong — after step" in r.stdout


# ----------------------------------------------------------------------------------------------- the grader
@pytest.fixture(scope="module")
def graded_zh(tmp_path_factory):
    from tinyserve.classroom import grade

    subs = tmp_path_factory.mktemp("zh-submissions")
    (subs / "mei").mkdir()  # the zh-TW reference answers
    (subs / "mei" / "7.1-exercises.ipynb").write_bytes((ZH_SOL / "7.1-exercises.ipynb").read_bytes())
    (subs / "ning").mkdir()  # a zh-TW exercise handed back blank
    (subs / "ning" / "7.4-exercises.ipynb").write_bytes((ZH_EX / "7.4-exercises.ipynb").read_bytes())
    wrong_kv(ZH_SOL / "7.4-exercises.ipynb", subs / "ou" / "7.4-exercises.ipynb")
    settings = grade.Settings(cpu_s=60, cell_cpu_s=10, memory_bytes=2 << 30, max_procs=24, wall_s=180, lang="zh-TW")
    lines = []
    rows = grade.grade(subs, ROOT / "chapters", settings, workers=2, log=lambda m, file=None: lines.append(m))
    return rows, lines


def test_grader_gives_a_zh_tw_notebook_the_points_of_the_english_one(graded_zh):
    rows, lines = graded_zh
    by = {s: [r for r in rows if r.student == s] for s in ("mei", "ning", "ou")}
    assert [(r.result, r.points) for r in by["mei"]] == [("passed", 1), ("passed", 1), ("passed", 3)]
    assert all(r.result == "blank" and r.points == 0 and "還沒寫" in r.message for r in by["ning"]), by["ning"]
    ou = {r.exercise: r for r in by["ou"]}  # the CSV's exercise names and result codes are data: English
    assert ou["7.4 (l) slabs that fit"].result == ou["7.4 (n) slab allocator"].result == "passed"
    m = ou["7.4 (m) KV bytes a sequence holds"]
    assert m.result == "failed" and m.points == 0 and "你的 kv_bytes_used" in m.message, m
    summaries = [ln for ln in lines if "：" in ln and "評分花了" not in ln and not ln.startswith("grade")]
    # 7.3 (o) added one graded answer (2 points) and one written explanation (3 points, by hand): 14 answers, 35 points
    assert summaries[0] == "mei：5/35 分，14 題通過 3 題（14 題未繳交）", summaries
