"""Write the exercise notebooks from the solutions: each answer region becomes a stub that raises.

    python -m tinyserve.classroom.generate [--solutions chapters/solutions] [--exercises chapters/exercises] [--check]

Exactly what nbgrader's generate_assignment does to the cells (so both give the same exercises): in a solution
cell (nbgrader metadata `solution: true`, tagged `solution` too) every region from a `### BEGIN SOLUTION` line
to its `### END SOLUTION` becomes the stub `# YOUR CODE HERE` + `raise NotImplementedError("write your answer
here")` at the marker's indentation (hints go above the marker, so they stay); a written answer (a markdown
solution cell) becomes "YOUR ANSWER HERE"; in a graded cell every region from `### BEGIN HIDDEN TESTS` to `### END
HIDDEN TESTS` is taken out (the grader restores the check cells from the solutions, and nbgrader's autograde from
its database, so the hidden tests run at grading only). In a zh-TW edition's notebook both stubs are in its language
(classroom.code_stub and classroom.text_stub in the classroom catalog): set nbgrader's ClearSolutions.code_stub
and text_stub to the same for that edition. Outputs are cleared.

Every other cell is given, and given cells are read-only: each must carry nbgrader metadata with `locked: true`
(nbgrader restores it at autograde and JupyterLab will not let it be edited), except the cells tagged `learner`
(a prediction or a sweep the learner writes, graded by nobody), which must carry no nbgrader metadata. A cell
that breaks this stops the generator, so no exercise is handed out with an unlocked given cell.
--check writes nothing and exits 1 when an exercise is missing or differs from what would be generated.
Not nbgrader's ClearSolutions: nbgrader is test-only; the grader (grade.py) would need it at run time.
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

BEGIN, END = "BEGIN SOLUTION", "END SOLUTION"  # words: ok (nbgrader's delimiters: a line containing one is a marker)
HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"  # words: ok (nbgrader's ClearHiddenTests delimiters)
# nbgrader's ClearSolutions.code_stub for python must be this text (chapters/README.md, tests/classroom/test_classroom_nbgrader.py)
STUB = '# YOUR CODE HERE\nraise NotImplementedError("write your answer here")'  # words: ok (nbgrader's code_stub)
TEXT_STUB = "YOUR ANSWER HERE"  # words: ok (nbgrader's text_stub: a written answer cell becomes this)
LEARNER_TAG = "learner"  # a given-empty cell the learner writes in (a prediction, a sweep): editable, never graded


def code_stub(nb) -> str:
    """The code stub in the notebook's language (STUB in English; nbgrader's code_stub for that edition)."""
    from ..lang import t
    from .notebooks import edition

    return t("classroom.code_stub", edition(nb))


def text_stub(nb) -> str:
    """The written-answer stub in the notebook's language (TEXT_STUB in English)."""
    from ..lang import t
    from .notebooks import edition

    return t("classroom.text_stub", edition(nb))


class GenerateError(Exception):
    """A solution notebook whose markers do not pair up, or sit outside a solution cell."""


def has_answer(source: str) -> bool:
    """True when a line of the source holds a BEGIN marker (as nbgrader reads it: anywhere in the line)."""
    return any(BEGIN in line for line in source.split("\n"))


def stub_source(source: str, where: str = "cell", stub: str = STUB) -> str:
    """The source with every answer region replaced by the stub, indented like its marker (as nbgrader does)."""
    out, region = [], None
    for line in source.split("\n"):
        if BEGIN in line:
            if region is not None:
                raise GenerateError(f"{where}: {BEGIN} inside another answer region")  # words: ok
            region = line[:len(line) - len(line.lstrip())]
            out += [region + s for s in stub.split("\n")]
        elif END in line:
            if region is None:
                raise GenerateError(f"{where}: {END} without {BEGIN}")  # words: ok
            region = None
        elif region is None:
            out.append(line)
    if region is not None:
        raise GenerateError(f"{where}: {BEGIN} without {END}")  # words: ok
    return "\n".join(out)


def strip_hidden(source: str, where: str = "cell") -> tuple[str, bool]:
    """(the source without its hidden-test regions, whether it had one), as nbgrader's ClearHiddenTests removes
    them: every line from a BEGIN HIDDEN TESTS line to its END line, both included."""
    out, inside, found = [], False, False
    for line in source.split("\n"):
        if HIDDEN_BEGIN in line:
            if inside:
                raise GenerateError(f"{where}: {HIDDEN_BEGIN} inside another hidden region")  # words: ok
            inside = found = True
        elif HIDDEN_END in line:
            if not inside:
                raise GenerateError(f"{where}: {HIDDEN_END} without {HIDDEN_BEGIN}")  # words: ok
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise GenerateError(f"{where}: {HIDDEN_BEGIN} without {HIDDEN_END}")  # words: ok
    return "\n".join(out), found


def is_solution(cell) -> bool:
    """A cell the learner answers in: nbgrader's solution flag, or our `solution` tag."""
    md = cell.get("metadata", {})
    return bool(md.get("nbgrader", {}).get("solution")) or "solution" in md.get("tags", [])


def check_given(cell, where: str) -> None:
    """A given cell is locked (nbgrader `locked: true`); a learner's cell (tag `learner`) has no nbgrader metadata."""
    md = cell.get("metadata", {})
    if LEARNER_TAG in md.get("tags", []):
        if "nbgrader" in md or cell.cell_type != "code":
            raise GenerateError(f"{where}: a learner's cell must be a code cell without nbgrader metadata")  # words: ok (for the author)
    elif not md.get("nbgrader", {}).get("locked"):
        raise GenerateError(f"{where}: a given cell without nbgrader `locked: true` (learners could edit it; "  # words: ok (for the author)
                            f"tag it `{LEARNER_TAG}` if the learner writes in it)")  # words: ok (for the author)


def make_exercise(nb):
    """An exercise notebook (a new object) from a solution notebook: the cells nbgrader's generate_assignment makes."""
    ex = copy.deepcopy(nb)
    answers, stub, code = 0, text_stub(nb), code_stub(nb)
    for cell in ex.cells:
        where = f"cell {cell.get('id')}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if not is_solution(cell):
            if has_answer(cell.source):
                raise GenerateError(f"{where}: has {BEGIN} but is not a solution cell (nbgrader would refuse it)")  # words: ok (for the author)
            check_given(cell, where)
            cell.source, hidden = strip_hidden(cell.source, where)
            if hidden and not cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
                raise GenerateError(f"{where}: hidden tests outside a graded cell (nbgrader would refuse it)")  # words: ok (for the author)
            continue
        answers += 1
        if has_answer(cell.source):
            cell.source = stub_source(cell.source, where, code)
        elif cell.cell_type == "code":
            raise GenerateError(f"{where}: a solution code cell without {BEGIN} (it would be handed out whole)")  # words: ok (for the author)
        else:
            cell.source = stub  # a written answer: the rubric stays in the solutions
    if not answers:
        raise GenerateError("no answer cells (solution cells)")  # words: ok
    ex.metadata.pop("widgets", None)
    return ex


def exercise_text(solution_path: Path) -> str:
    """The exercise notebook, as the text written to disk."""
    import nbformat  # lazy: notebook tooling stays out of `import tinyserve`

    nb = nbformat.read(solution_path, as_version=4)
    ex = make_exercise(nb)
    nbformat.validate(ex)
    return nbformat.writes(ex) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tinyserve.classroom.generate", description=__doc__.split("\n")[0])
    ap.add_argument("--solutions", type=Path, default=Path("chapters/solutions"))
    ap.add_argument("--exercises", type=Path, default=Path("chapters/exercises"))
    ap.add_argument("--check", action="store_true", help="only report exercises that are out of date")  # words: ok (the author's tool)
    args = ap.parse_args(argv)
    sols = sorted(args.solutions.glob("*.ipynb"))
    if not sols:
        print(f"generate: no solution notebooks in {args.solutions}", file=sys.stderr)  # words: ok
        return 2
    stale = []
    for sol in sols:
        try:
            text = exercise_text(sol)
        except GenerateError as e:
            print(f"generate: {sol}: {e}", file=sys.stderr)  # words: ok
            return 2
        dest = args.exercises / sol.name
        if dest.is_file() and dest.read_text(encoding="utf-8") == text:
            continue
        stale.append(dest)
        if not args.check:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
    known = {s.name for s in sols}
    extra = [p for p in sorted(args.exercises.glob("*.ipynb")) if p.name not in known]
    if args.check:
        for p in stale:
            print(f"out of date: {p} (run python -m tinyserve.classroom.generate)")  # words: ok
        for p in extra:
            print(f"no solution for: {p}")  # words: ok
        return 1 if stale or extra else 0
    print(f"wrote {len(stale)} of {len(sols)} exercise notebooks to {args.exercises}"  # words: ok
          + (f"; no solution for {', '.join(map(str, extra))}" if extra else ""))  # words: ok
    return 0


if __name__ == "__main__":
    sys.exit(main())
