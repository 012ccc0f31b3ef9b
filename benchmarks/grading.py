"""Grade a generated class of 40 with `python -m tinyserve.classroom.grade` and time it.

    OMP_NUM_THREADS=1 python benchmarks/grading.py [--students 40] [--workers 2] [--keep DIR]

Every student hands in all four exercise notebooks. The class: correct (the solutions), blank (as handed out),
partly wrong (a plausible wrong answer or two per notebook), and hostile, one kind each: an endless loop that
swallows the per-cell stop, a memory hog in every answer, a fork bomb, deleting the checker's files,
monkeypatching the checker, rebinding AssertionError (each in one notebook; its answers are otherwise right).
Reported: the wall time of the whole run and the load average it started at; then every student's total is
compared with what that student must get (hostile notebooks: zero, each row with a reason), so a hostile
submission that changed anybody's grade, stopped the run or passed is reported as a failure (exit 1).
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOL, EX = ROOT / "chapters" / "solutions", ROOT / "chapters" / "exercises"
NAMES = ["7.1-exercises.ipynb", "7.2-exercises.ipynb", "7.3-exercises.ipynb", "7.4-exercises.ipynb"]
POINTS = {"7.1-exercises.ipynb": 5, "7.2-exercises.ipynb": 8, "7.3-exercises.ipynb": 8, "7.4-exercises.ipynb": 5}
# plausible wrong answers per notebook: [(cell id, source, points it loses)]; 7.3 (o)'s is right in form (the
# learner's copy passes it) and fails only the grader's hidden tests
WRONG = {
    "7.1-exercises.ipynb": [("a-answer", "def padding_tokens(prompt_lens):\n"
                             "    return sum(max(prompt_lens) - n + 1 for n in prompt_lens)", 1)],
    "7.2-exercises.ipynb": [("f-answer", "def first_step(trace, request_id):\n    for s in trace.steps:\n"
                            "        if any(w.request_id == request_id for w in s.works):\n            return s.index\n\n\n"
                            "def slot_waste(trace, slot):\n    return sum(w.tokens for s in trace.steps for w in s.works\n"
                            "               if w.slot == slot and w.phase == 'wasted')", 1)],
    "7.3-exercises.ipynb": [("j-answer", "def pick_chunk(measure, candidates, itl_target_ms, ttft_target_ms):\n"
                             "    ok = [c for c in candidates if measure(c)[0] <= itl_target_ms]\n"
                             "    return max(ok) if ok else None", 1),
                            ("o-answer", "def my_deployment():\n    return 'colocated:2', 0.94", 2)],
    "7.4-exercises.ipynb": [("m-answer", "def kv_bytes_used(prompt_len, generated, bytes_per_token):\n"
                             "    return (prompt_len + generated) * bytes_per_token", 1)],
}
# hostile code, in a cell of its own before the answers (the answers themselves are right)
HOSTILE = {
    "loop": "while True:  # swallows the per-cell stop too\n    try:\n        while True:\n            pass\n"
            "    except BaseException:\n        pass",
    "fork": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "delete": "import pathlib, tinyserve\nfor p in pathlib.Path(tinyserve.__path__[0]).rglob('*.py'):\n"
              "    try:\n        p.unlink()\n    except OSError:\n        pass",
    "patch": "import tinyserve.classroom.checks as c\nfor name in list(vars(c)):\n"
             "    if not name.startswith('_') and callable(getattr(c, name)):\n"
             "        setattr(c, name, lambda *a, **k: None)",
    "rebind": "AssertionError = Exception",
}
# a memory hog replaces every answer's body: it allocates more than the box allows before answering
HOG = "hog = [bytearray(1 << 26) for _ in range(1024)]  # 64 GiB, 64 MiB at a time"


def make_class(out: Path, n: int) -> dict[str, int]:
    """Write the submissions; student -> the total points they must get."""
    import nbformat

    kinds = ["correct"] * 10 + ["blank"] * 8 + ["wrong"] * 10 + [
        "loop", "loop", "hog", "hog", "fork", "fork", "delete", "delete", "patch", "patch", "rebind", "rebind"]
    first = list(dict.fromkeys(kinds))  # one of each kind first, so a small class still has every kind
    for k in first:
        kinds.remove(k)
    kinds = ((first + kinds) * (n // 40 + 1))[:n]
    expect = {}
    for i, kind in enumerate(kinds):
        student = f"s{i:02d}-{kind}"
        d = out / student
        d.mkdir(parents=True)
        total = 0
        for j, name in enumerate(NAMES):
            nb = nbformat.read((EX if kind == "blank" else SOL) / name, as_version=4)
            hostile_here = (kind in HOSTILE or kind == "hog") and j == i % 4
            if kind == "wrong":
                total += POINTS[name]
                for cid, src, lost in WRONG[name]:
                    next(c for c in nb.cells if c.get("id") == cid).source = src
                    total -= lost
            elif kind == "correct" or (kind not in ("blank",) and not hostile_here):
                total += POINTS[name]
            if hostile_here and kind in HOSTILE:
                at = next(k for k, c in enumerate(nb.cells) if "solution" in c.metadata.get("tags", []))
                nb.cells.insert(at, nbformat.v4.new_code_cell(HOSTILE[kind]))
            if hostile_here and kind == "hog":
                for c in nb.cells:
                    if "solution" in c.metadata.get("tags", []) and c.cell_type == "code":
                        c.source = "\n".join(ln + ("\n" + ln[:len(ln) - len(ln.lstrip())] + HOG
                                                   if "BEGIN SOLUTION" in ln else "") for ln in c.source.split("\n"))
            nbformat.write(nb, d / name)
        expect[student] = total
    return expect


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--students", type=int, default=40)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--keep", type=Path, default=None, help="write the class and the tables here (else a temp dir)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="grading-bench-")) if args.keep is None else args.keep
    subs = tmp / "submissions"
    shutil.rmtree(subs, ignore_errors=True)
    expect = make_class(subs, args.students)
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ["?"] * 3
    cmd = [sys.executable, "-m", "tinyserve.classroom.grade", str(subs), "--out", str(tmp / "scores.csv"),
           "--chapters", str(ROOT / "chapters")]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    print(f"grading {len(expect)} students x {len(NAMES)} notebooks on {os.cpu_count()} cores; "
          f"load average at start {' '.join(load)}", flush=True)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    wall = time.perf_counter() - t0
    print(f"graded in {wall / 60:.1f} min ({wall:.0f} s), exit status {r.returncode}")
    (tmp / "grade.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        print(r.stderr[-3000:])
        return 1
    with open(tmp / "scores.csv", encoding="utf-8") as f:
        table = {row["student"]: row for row in csv.DictReader(f)}
    with open(tmp / "scores-details.csv", encoding="utf-8") as f:
        details = list(csv.DictReader(f))
    bad = []
    for student, total in expect.items():
        got = float(table[student]["total"])
        if got != total:
            bad.append(f"{student}: total {got:g}, expected {total}")
    for row in details:
        kind = row["student"].split("-", 1)[1]
        if kind in HOSTILE or kind == "hog":
            if row["result"] not in ("passed", "manual") and not row["message"]:
                bad.append(f"{row['student']} {row['exercise']}: zero without a reason")
    reasons: dict[str, set[str]] = {}
    for row in details:
        kind = row["student"].split("-", 1)[1]
        if (kind in HOSTILE or kind == "hog") and row["result"] in ("failed", "integrity"):
            reasons.setdefault(kind, set()).add(row["message"][:110])
    for kind, msgs in sorted(reasons.items()):
        print(f"  {kind}: " + " | ".join(sorted(msgs)[:2]))
    print(f"{len(expect) - len({b.split(':')[0] for b in bad})} of {len(expect)} students got exactly their expected "
          f"total; tables in {tmp}")
    for b in bad:
        print("  MISMATCH", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
