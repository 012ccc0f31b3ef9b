"""Write the exercise notebooks from the solutions: each answer region becomes a stub that raises.

    python -m tinyserve.classroom.generate [--solutions chapters/solutions] [--exercises chapters/exercises] [--check]

An answer region is nbgrader's: the lines between `### BEGIN SOLUTION` and `### END SOLUTION` in a code cell
tagged `solution`. The stub keeps the region's `# Hint:` comments and raises NotImplementedError, so the
cell still runs and the check below it fails until the learner writes the answer. Outputs are cleared.
--check writes nothing and exits 1 when an exercise is missing or differs from what would be generated.
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("write your answer here")'


class GenerateError(Exception):
    """A solution notebook whose markers do not pair up."""


def has_answer(source: str) -> bool:
    """True when a line of the source is a BEGIN marker (a mention inside prose does not count)."""
    return any(line.strip() == BEGIN for line in source.split("\n"))


def stub_source(source: str, where: str = "cell") -> str:
    """The source with every answer region replaced by its hints and a raising stub."""
    out, region = [], None
    for line in source.split("\n"):
        text = line.strip()
        if text == BEGIN:
            if region is not None:
                raise GenerateError(f"{where}: {BEGIN} inside another answer region")
            region = line[:len(line) - len(line.lstrip())]
            out.append(f"{region}# YOUR CODE HERE")
        elif text == END:
            if region is None:
                raise GenerateError(f"{where}: {END} without {BEGIN}")
            out.append(region + STUB)
            region = None
        elif region is None:
            out.append(line)
        elif text.startswith("# Hint:"):
            out.append(region + text)
    if region is not None:
        raise GenerateError(f"{where}: {BEGIN} without {END}")
    return "\n".join(out)


def make_exercise(nb):
    """An exercise notebook (a new object) from a solution notebook."""
    ex = copy.deepcopy(nb)
    answers = 0
    for cell in ex.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            if "solution" in tags:
                if not has_answer(cell.source):
                    raise GenerateError(f"cell {cell.get('id')}: tagged solution but has no {BEGIN}")
                cell.source = stub_source(cell.source, f"cell {cell.get('id')}")
                answers += 1
        elif has_answer(cell.source):
            raise GenerateError(f"cell {cell.get('id')}: answer markers outside a code cell")
        if "solution" not in tags and has_answer(cell.get("source", "")):
            raise GenerateError(f"cell {cell.get('id')}: has {BEGIN} but is not tagged solution")
    if not answers:
        raise GenerateError("no answer cells (code cells tagged solution)")
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
    ap.add_argument("--check", action="store_true", help="only report exercises that are out of date")
    args = ap.parse_args(argv)
    sols = sorted(args.solutions.glob("*.ipynb"))
    if not sols:
        print(f"generate: no solution notebooks in {args.solutions}", file=sys.stderr)
        return 2
    stale = []
    for sol in sols:
        try:
            text = exercise_text(sol)
        except GenerateError as e:
            print(f"generate: {sol}: {e}", file=sys.stderr)
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
            print(f"out of date: {p} (run python -m tinyserve.classroom.generate)")
        for p in extra:
            print(f"no solution for: {p}")
        return 1 if stale or extra else 0
    print(f"wrote {len(stale)} of {len(sols)} exercise notebooks to {args.exercises}"
          + (f"; no solution for {', '.join(map(str, extra))}" if extra else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
