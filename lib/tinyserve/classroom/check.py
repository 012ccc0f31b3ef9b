"""Check your own answers: correct, wrong (with the check's message) or not attempted, per answer.

    python -m tinyserve.classroom.check chapters/exercises/7.1-exercises.ipynb [more notebooks] [--lang zh-TW]

Needs only the learner's install (requirements.txt): it runs the saved notebook's code cells in order in this
process, then reports each check cell. In a notebook, its last cell does the same for the kernel's answers:
`check_here(globals(), "7.1")`, in the kernel's current language. Exit status 0 when every answer is correct, 1
otherwise, 2 for a bad file. The report and the checks' messages are in the notebook's own language (the one its
setup line `tinyserve.set_language(...)` picks: chapters/zh-TW/exercises speak 繁體中文), or in --lang.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

from ..lang import normalize, set_language, t
from .notebooks import OPEN_TAG, check_cells, edition, label_of, points_of, read_notebook, tags
from .text import exercise_name, say

# every graded answer of a notebook: (exercise, checker in checks.CHECKERS, the name the answer defines, points);
# the check cells' metadata say the same (tests/classroom/test_classroom.py holds them together). An exercise's
# label is a key: exercise_name() shows it in the learner's language (classroom.label.<label>)
EXERCISES = {
    "7.1": [("7.1 (a) padding tokens", "padding_tokens", "padding_tokens", 1),  # words: ok (a key)
            ("7.1 (b) wasted fraction", "wasted_fraction", "wasted_fraction", 1),  # words: ok (a key)
            ("7.1 (c) dynamic batching policy", "dynamic_policy", "MyDynamic", 3)],  # words: ok (a key)
    "7.2": [("7.2 (d) continuous batching policy", "continuous_policy", "MyContinuous", 3),  # words: ok (a key)
            ("7.2 (e) decode-first with a bound", "decode_first_policy", "MyDecodeFirst", 3),  # words: ok (a key)
            ("7.2 (f) first step of a request", "first_step", "first_step", 1),  # words: ok (a key)
            ("7.2 (f) tokens a slot wasted", "slot_waste", "slot_waste", 1)],  # words: ok (a key)
    "7.3": [("7.3 (h) token-budget chunker", "plan_chunks", "plan_chunks", 2),  # words: ok (a key)
            ("7.3 (i) chunked prefill policy", "chunked_policy", "MyChunked", 3),  # words: ok (a key)
            ("7.3 (j) choose a chunk length", "pick_chunk", "pick_chunk", 1),  # words: ok (a key)
            ("7.3 (o) choose a deployment", "deployment_choice", "my_deployment", 2)],  # words: ok (a key)
    "7.4": [("7.4 (l) slabs that fit", "slabs_that_fit", "slabs_that_fit", 1),  # words: ok (a key)
            ("7.4 (m) KV bytes a sequence holds", "kv_bytes_used", "kv_bytes_used", 1),  # words: ok (a key)
            ("7.4 (n) slab allocator", "slab_allocator", "MySlabs", 3)],  # words: ok (a key)
}
OPEN = {"7.2": ["7.2 (g) where continuous batching pays"],  # words: ok (a key)
        "7.3": ["7.3 (k) a chunk length for a service", "7.3 (o) why that deployment"]}  # words: ok (a key)
# answers whose check here sees their form only: the grader runs hidden checks on them (checks.HIDDEN)
FORM_ONLY = {label for rows in EXERCISES.values() for label, checker, _, _ in rows if checker == "deployment_choice"}
MARK = {"passed": "✓", "failed": "✗", "integrity": "✗", "blank": "·", "manual": "?", "form": "?"}


def _status(label: str, status: str) -> str:
    """A passed check of an answer the grader checks again (FORM_ONLY) reads "form": right so far, not a grade."""
    return "form" if status == "passed" and label in FORM_ONLY else status


def _line(label: str, status: str, message: str = "") -> str:
    word = {"passed": say("sc_correct"), "failed": say("sc_wrong"), "integrity": say("sc_wrong"),
            "blank": say("sc_blank"), "manual": say("sc_manual"), "form": say("sc_form")}[status]
    return say("sc_line", mark=MARK[status], label=exercise_name(label), status=word,
               msg=say("sc_msg", message=message) if message and status in ("failed", "integrity") else "")


def _total(outcomes: list[tuple[str, str, float]]) -> str:
    graded = [(s, p) for s, p in ((s, p) for _, s, p in outcomes) if s not in ("manual", "form")]
    return say("sc_total", correct=sum(s == "passed" for s, _ in graded), total=len(graded),
               points=sum(p for s, p in graded if s == "passed"), max_points=sum(p for _, p in graded),
               blank=sum(s == "blank" for s, _ in graded))


def check_here(ns: dict, notebook: str) -> None:
    """In a kernel: run every check of this notebook on the answers defined so far and print the verdicts."""
    from . import checks
    from .runner import classify

    outcomes = []
    for label, checker, name, pts in EXERCISES[notebook]:
        answer = ns.get(name)
        if answer is None:
            out_status, out_msg = "blank", ""
        else:
            sink = io.StringIO()
            try:
                with contextlib.redirect_stdout(sink):
                    checks.CHECKERS[checker](answer)
                err = None
            except Exception as e:  # noqa: BLE001 - every failure is reported, none stops the others
                err = e
            out = classify(err)
            out_status, out_msg = _status(label, out.status), out.message
        print(_line(label, out_status, out_msg))
        outcomes.append((label, out_status, pts))
    for label in OPEN.get(notebook, []):
        print(_line(label, "manual"))
    print(_total(outcomes))


def check_file(path: Path, lang: str | None = None) -> int:
    """Run a saved notebook and report its check cells (in lang, else the notebook's language); the exit status."""
    from .runner import execute

    nb, why = read_notebook(path)
    set_language(lang or (edition(nb) if nb is not None else "en"))
    if nb is None:
        print(say("sc_bad_file", path=path, why=why))
        return 2
    if not check_cells(nb):
        print(say("sc_bad_file", path=path, why=say("other_assignment")))
        return 2
    for i, cell in enumerate(nb.cells):  # an old file without cell ids: the check cells are found by tag
        if not cell.get("id"):
            cell["id"] = f"cell-{i}"
    print(say("sc_running", path=path), flush=True)
    lang = lang or edition(nb)
    results = execute(nb, lang=lang)  # the checks speak lang, whatever the notebook's setup line chose
    set_language(lang)
    outcomes = []
    for cell in check_cells(nb):
        out = results.get(cell.get("id"))
        status, msg = (_status(label_of(cell), out.status), out.message) if out else ("failed", say("not_run"))
        print(_line(label_of(cell), status, msg))
        outcomes.append((label_of(cell), status, points_of(cell)))
    for cell in nb.cells:
        if OPEN_TAG in tags(cell):
            print(_line(label_of(cell), "manual"))
    print(_total(outcomes))
    return 0 if all(s in ("passed", "form") for _, s, _ in outcomes) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tinyserve.classroom.check", description=t("cli.check.description"))
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--lang", type=normalize, default=None, help=t("cli.check.lang"))
    args = ap.parse_args(argv)
    return max(check_file(p, args.lang) for p in args.notebooks)


if __name__ == "__main__":
    sys.exit(main())
