"""Build the notebooks (7.0-7.4, the gallery 7.5, the evidence appendix 7.6) from chapters/src/, executed.

    OMP_NUM_THREADS=1 python chapters/build.py            # all notebooks: every src/7.*.py
    OMP_NUM_THREADS=1 python chapters/build.py 7.1 7.3    # some
    python chapters/build.py --no-exec 7.2                # write without running (outputs empty)
    OMP_NUM_THREADS=1 python chapters/build.py --lang zh-TW            # the 繁體中文 edition: chapters/zh-TW/
    python chapters/build.py --lang zh-TW --skeleton 7.2  # start a translation: src/zh-TW/7.2-....py

Editions: the English source `src/7.x-NAME.py` is the only place code lives. A translation
`src/zh-TW/7.x-NAME.py` holds only markdown cells, in the same order as the source's; the edition is the
source with its markdown cells swapped for those and its one setup line `tinyserve.set_language("en")`
changed to the edition's language, so the code cells are identical and nbval checks the same numbers. Every
string a code cell prints or draws comes from tinyserve.lang. The exercises work the same way from
`solutions/7.x-exercises.ipynb` (markdown cells swapped in order, metadata and cell ids kept, so a grader
matches check cells across languages) into `zh-TW/solutions/`, and `zh-TW/exercises/` is generated from them.

A source is a plain Python file in "percent" format: `# %% [markdown]` starts a markdown cell (its lines are
comment lines "# ..."), `# %%` starts a code cell. Notebooks are executed with nbclient in the chapters/
folder (as nbval and JupyterLab run them); widget state (metadata.widgets) and per-cell timing metadata
are stripped so the committed files stay small and diff cleanly. The run time of each notebook is printed.
"""
from __future__ import annotations

import re
import resource
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}
SETUP = 'tinyserve.set_language("en")'  # the one line of code that differs between editions
EDITIONS = ("zh-TW",)


class EditionError(Exception):
    """A translation that does not line up with its source."""


def parse(text: str) -> list:
    """Cells of a percent-format source."""
    cells, kind, lines = [], None, []

    def flush():
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(re.sub(r"^# ?", "", ln) for ln in body.splitlines())
            cells.append(nbformat.v4.new_markdown_cell(body))
        elif body:
            cells.append(nbformat.v4.new_code_cell(body))

    for ln in text.splitlines():
        if ln.startswith("# %%"):
            flush()
            kind, lines = ("markdown" if "[markdown]" in ln else "code"), []
        elif kind is not None:
            lines.append(ln)
    flush()
    return cells


def clean(nb, keep_ids: bool = False) -> None:
    """Drop widget state and execution timestamps; keep outputs and execution counts (and cell ids if asked:
    the exercises' graders match cells by id)."""
    nb.metadata.pop("widgets", None)
    for c in nb.cells:
        c.metadata.pop("execution", None)
        if not keep_ids:
            c.pop("id", None)
    if not keep_ids:
        nb.nbformat, nb.nbformat_minor = 4, 4


def translate(cells: list, lang: str, text: str, where: str) -> None:
    """Swap the markdown cells' text for the translation's (same count, same order) and set the language."""
    mine = [c for c in parse(text) if c.cell_type == "markdown"]
    theirs = [c for c in cells if c.cell_type == "markdown"]
    if len(mine) != len(theirs):
        raise EditionError(f"{where}: {len(mine)} markdown cells, the source has {len(theirs)}")
    for c, m in zip(theirs, mine):
        c.source = m.source
    setups = [c for c in cells if c.cell_type == "code" and SETUP in c.source.split("\n")]
    if len(setups) != 1:
        raise EditionError(f"{where}: the source needs exactly one line `{SETUP}`, found {len(setups)}")
    setups[0].source = setups[0].source.replace(SETUP, SETUP.replace('"en"', f'"{lang}"'))


def skeleton(cells: list) -> str:
    """A translation file to start from: the source's markdown cells, in order."""
    return "\n\n".join("# %% [markdown]\n" + "\n".join(("# " + ln).rstrip() for ln in c.source.splitlines())
                       for c in cells if c.cell_type == "markdown") + "\n"


def build(src: Path, execute: bool = True, lang: str = "en") -> float:
    """Write chapters/[lang/]<name>.ipynb from src (executed unless told not to); returns the run time in s."""
    nb = nbformat.v4.new_notebook()
    nb.cells = parse(src.read_text(encoding="utf-8"))
    out_dir = HERE
    if lang != "en":
        translate(nb.cells, lang, (SRC / lang / src.name).read_text(encoding="utf-8"), f"src/{lang}/{src.name}")
        out_dir = HERE / lang
    nb.metadata["kernelspec"] = KERNEL
    nb.metadata["language_info"] = {"name": "python"}
    return run_and_write(nb, src.stem, out_dir, execute)


def build_solution(path: Path, lang: str, execute: bool = True) -> float:
    """Write chapters/<lang>/solutions/<name>.ipynb from the English solution and src/<lang>/<name>.py."""
    nb = nbformat.read(path, as_version=4)
    translate(nb.cells, lang, (SRC / lang / f"{path.stem}.py").read_text(encoding="utf-8"),
              f"src/{lang}/{path.stem}.py")
    return run_and_write(nb, path.stem, HERE / lang / "solutions", execute, keep_ids=True)


def run_and_write(nb, stem: str, out_dir: Path, execute: bool, keep_ids: bool = False) -> float:
    """Execute nb in out_dir (as nbval and JupyterLab run it), strip it, write out_dir/<stem>.ipynb."""
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if execute:
        try:
            NotebookClient(nb, timeout=600, kernel_name="python3",
                           resources={"metadata": {"path": str(out_dir)}}).execute()
        except CellExecutionError as e:  # keep the partial notebook to look at; report and go on
            print(f"{stem}: FAILED\n{str(e)[-3000:]}", file=sys.stderr)
    took = time.perf_counter() - t0
    slow = []
    for i, c in enumerate(nb.cells):
        ex = c.metadata.get("execution", {})
        if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            d = (datetime.fromisoformat(ex["shell.execute_reply"].replace("Z", "+00:00"))
                 - datetime.fromisoformat(ex["iopub.execute_input"].replace("Z", "+00:00"))).total_seconds()
            slow.append((d, i))
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the kernel is our child: its CPU time and peak memory
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    print(f"{stem}: kernel CPU {cpu:.1f} s, largest child's peak RSS {cpu1.ru_maxrss / 1024:.0f} MB")
    if slow:
        print(f"{stem}: slowest cells " + ", ".join(f"#{i} {d:.1f}s" for d, i in sorted(slow)[::-1][:4]))
    clean(nb, keep_ids)
    out = out_dir / f"{stem}.ipynb"
    out.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return took


def main(argv: list[str]) -> None:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return
    unknown = [a for a in argv if a.startswith("-") and a not in ("--no-exec", "--lang", "--skeleton")]
    if unknown:
        sys.exit(f"build.py: unknown option {unknown[0]} (options: --no-exec, --lang CODE, --skeleton; -h for help)")
    execute = "--no-exec" not in argv
    lang = argv[argv.index("--lang") + 1] if "--lang" in argv else "en"
    if lang != "en" and lang not in EDITIONS:
        sys.exit(f"build.py: unknown edition {lang!r}; available: en, {', '.join(EDITIONS)}")
    wanted = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] != "--lang")]
    srcs = sorted(SRC.glob("7.*.py"))
    sols = sorted((HERE / "solutions").glob("7.*.ipynb")) if lang != "en" else []
    if wanted:  # "7.2" names the chapter notebook; "7.2-exercises" (or "exercises") its exercises
        srcs = [s for s in srcs if any(s.stem.startswith(w) for w in wanted if "exercises" not in w)]
        sols = [s for s in sols if any(s.stem.startswith(w) or w == "exercises" for w in wanted if "exercises" in w)]
    if "--skeleton" in argv:
        for s in srcs:
            cells = parse(s.read_text(encoding="utf-8"))
            _write_new(SRC / lang / s.name, skeleton(cells))
        for s in sols:
            _write_new(SRC / lang / f"{s.stem}.py", skeleton(nbformat.read(s, as_version=4).cells))
        return
    for s in srcs:
        took = build(s, execute, lang)
        print(f"{lang}/{s.stem}.ipynb  {took:5.1f} s", flush=True)
    built = 0
    for s in sols:
        if not (SRC / lang / f"{s.stem}.py").exists():
            print(f"{lang}/solutions/{s.stem}.ipynb: no translation yet (src/{lang}/{s.stem}.py)", file=sys.stderr)
            continue
        took = build_solution(s, lang, execute)
        built += 1
        print(f"{lang}/solutions/{s.stem}.ipynb  {took:5.1f} s", flush=True)
    if built:  # the handed-out notebooks of this edition, as generate makes the English ones
        from tinyserve.classroom import generate
        generate.main(["--solutions", str(HERE / lang / "solutions"), "--exercises", str(HERE / lang / "exercises")])


def _write_new(path: Path, text: str) -> None:
    if path.exists():
        print(f"{path} exists; not overwritten", file=sys.stderr)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
