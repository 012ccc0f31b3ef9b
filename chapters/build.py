"""Build the notebooks (7.0-7.4, the gallery 7.5, the evidence appendix 7.6) from chapters/src/, executed.

    OMP_NUM_THREADS=1 python chapters/build.py            # all notebooks: every src/7.*.py
    OMP_NUM_THREADS=1 python chapters/build.py 7.1 7.3    # some
    python chapters/build.py --no-exec 7.2                # write without running (outputs empty, {glue} unfilled)
    OMP_NUM_THREADS=1 python chapters/build.py --lang zh-TW            # the 繁體中文 edition: chapters/zh-TW/
    python chapters/build.py --lang zh-TW --update 7.2    # merge 7.2's current English into its catalog

Editions: the English source `src/7.x-NAME.py` is the only place code and words live. A translation is a
gettext catalog per notebook, `locale/zh_TW/7.x-NAME.po` (editions.py): every English markdown block looked up
there by its text; the edition is the source with each block swapped for its translation and its one setup line
`tinyserve.set_language("en")` changed to the edition's language, so the code cells are identical and nbval
checks the same numbers. A block with no entry, or an untranslated or fuzzy one, stops the build naming the
notebook, the catalog and the block; `--update` merges the current English in for the translator (new blocks
untranslated, changed ones fuzzy, vanished ones obsolete). Every string a code cell prints or draws comes from
tinyserve.lang. The exercises work the same way from `solutions/7.x-exercises.ipynb` (metadata and cell ids
kept, so a grader matches check cells across languages) into `zh-TW/solutions/`, and `zh-TW/exercises/` is
generated from them.

Glue: prose writes {glue}`name` where a value computed by the notebook's code goes, and the code records it with
tinyserve.lang.glue.glue(name, value, fmt, measured=False). The kernel runs with $TINYSERVE_GLUE_FILE set; after
the run every
{glue}`name` of the notebook's markdown is filled from what its code recorded (each edition from its own kernel,
so a glued word is in the edition's language), and kept in the notebook's metadata (tinyserve.glue). A name no
cell recorded, or a wall-clock measurement (measured=True) in prose, stops the build naming it. --no-exec
leaves the roles as they are.

A source is a plain Python file in "percent" format: `# %% [markdown]` starts a markdown cell (its lines are
comment lines "# ..."), `# %%` starts a code cell. Notebooks are executed with nbclient in the chapters/
folder (as nbval and JupyterLab run them); widget state (metadata.widgets) and per-cell timing metadata
are stripped so the committed files stay small and diff cleanly. The run time of each notebook is printed.
Not jupytext: its percent format has no [reveal]/[hide-code] marks (45 headers in 7 sources to re-mark as options).
"""
from __future__ import annotations

import os
import re
import resource
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

import editions
from tinyserve.lang import needs_space
from tinyserve.lang.drawn import ENV as TEXT_ENV
from tinyserve.lang.glue import ENV as GLUE_ENV, recorded

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}
SETUP = 'tinyserve.set_language("en")'  # the one line of code that differs between editions
EDITIONS = ("zh-TW",)


class EditionError(Exception):
    """A notebook that cannot be built as asked: its setup line, its catalog, a glue name; the message names it."""


# a code cell's header may mark it: `# %% [reveal]` a cell that settles a prediction (tagged "reveal": its code is
# one `with QUESTION.after_prediction():` block, so until the learner predicts it shows a hint and keeps the
# answer in a closed <details>, on any run; nbval still compares the whole output), `# %% [hide-code]` folds
# the source (long plotting code; metadata.jupyter, which JupyterLab honours); both may be given:
# `# %% [reveal, hide-code]`
MARKS = ("reveal", "hide-code")
REVEAL_BLOCK = re.compile(r"\Awith \w+\.after_prediction\(\):\n(?:(?:    .*|)\n)*(?:    .*)?\Z")


def _mark(cell, marks: list) -> None:
    """Set what a code cell's header asks; a reveal cell that is not one after_prediction block stops the build."""
    if "hide-code" in marks:
        cell.metadata["jupyter"] = {"source_hidden": True}
    if "reveal" in marks:
        code = "\n".join(ln for ln in cell.source.splitlines() if not ln.startswith("#"))  # its top-level comments
        if not REVEAL_BLOCK.match(code.strip("\n")):
            raise EditionError("a reveal cell must be one `with QUESTION.after_prediction():` block (after its "
                               f"comment lines), so that Run All shows no answer: {cell.source[:160]!r}")
        cell.metadata["tags"] = ["reveal"]


def parse(text: str) -> list:
    """Cells of a percent-format source."""
    cells, kind, lines, folds = [], None, [], []

    def flush():
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(re.sub(r"^# ?", "", ln) for ln in body.splitlines())
            cells.append(nbformat.v4.new_markdown_cell(body))
        elif body:
            cell = nbformat.v4.new_code_cell(body)
            _mark(cell, folds)
            cells.append(cell)

    for ln in text.splitlines():
        if ln.startswith("# %%"):
            flush()
            m = re.match(r"# %%\s*(?:\[([^\]]*)\])?\s*$", ln)
            if not m:
                raise EditionError(f"a cell header that build.py does not read: {ln!r}")
            words = [w.strip() for w in (m.group(1) or "").split(",") if w.strip()]
            unknown = [w for w in words if w != "markdown" and w not in MARKS]
            if unknown or ("markdown" in words and len(words) > 1):
                raise EditionError(f"a cell header that build.py does not read: {ln!r} (a code cell takes "
                                   f"{', '.join(MARKS)}; a markdown cell nothing else)")
            kind = "markdown" if "markdown" in words else "code"
            folds, lines = [w for w in words if w in MARKS], []
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


def translate(cells: list, stem: str, lang: str) -> None:
    """Swap the markdown for the edition's (from its catalog, block by block) and set the language."""
    try:
        editions.render(cells, stem, lang)
    except editions.CatalogError as e:
        raise EditionError(str(e)) from None
    setups = [c for c in cells if c.cell_type == "code" and SETUP in c.source.split("\n")]
    if len(setups) != 1:
        raise EditionError(f"{stem}: the source needs exactly one line `{SETUP}`, found {len(setups)}")
    setups[0].source = setups[0].source.replace(SETUP, SETUP.replace('"en"', f'"{lang}"'))


def fill_glue(nb, stem: str, values: dict[str, dict]) -> None:
    """Put each recorded value where the markdown says {glue}`name` and keep what was glued in the notebook's
    metadata (tinyserve.glue: name -> {"text", "measured"}), where a test compares the two editions. EditionError
    naming a name nobody recorded, or a wall-clock measurement put in prose."""
    used = sorted({n for c in nb.cells if c.cell_type == "markdown" for n in editions.glue_names(c.source)})
    missing = [n for n in used if n not in values]
    if missing:
        raise EditionError(f"{stem}: {{glue}}`{missing[0]}` is in the text but no cell recorded it"
                           + (f" (nor {', '.join(missing[1:])})" if missing[1:] else "")
                           + "; record it with tinyserve.lang.glue.glue(name, value)")
    measured = [n for n in used if values[n].get("measured")]
    if measured:
        raise EditionError(f"{stem}: {{glue}}`{measured[0]}` is a wall-clock measurement: it differs between builds "
                           "(and editions), so the prose must point at the reader's own output instead")
    def filled(m) -> str:  # a value meets a Chinese character across a space, as t() fills a field (lang)
        text, src = values[m.group(1)]["text"], m.string
        return ((" " if needs_space(src[:m.start()], text) else "") + text
                + (" " if needs_space(text, src[m.end():]) else ""))

    for c in nb.cells:
        if c.cell_type == "markdown":
            c.source = editions.GLUE.sub(filled, c.source)
    nb.metadata.setdefault("tinyserve", {})["glue"] = {n: values[n] for n in used}


def build(src: Path, execute: bool = True, lang: str = "en") -> float:
    """Write chapters/[lang/]<name>.ipynb from src (executed unless told not to); returns the run time in s."""
    nb = nbformat.v4.new_notebook()
    nb.cells = parse(src.read_text(encoding="utf-8"))
    out_dir = HERE
    if lang != "en":
        translate(nb.cells, src.stem, lang)
        out_dir = HERE / lang
    nb.metadata["kernelspec"] = KERNEL
    nb.metadata["language_info"] = {"name": "python"}
    return run_and_write(nb, src.stem, out_dir, execute)


def build_solution(path: Path, lang: str, execute: bool = True) -> float:
    """Write chapters/<lang>/solutions/<name>.ipynb from the English solution and locale/<lang>/<name>.po."""
    nb = nbformat.read(path, as_version=4)
    translate(nb.cells, path.stem, lang)
    return run_and_write(nb, path.stem, HERE / lang / "solutions", execute, keep_ids=True)


def run_and_write(nb, stem: str, out_dir: Path, execute: bool, keep_ids: bool = False) -> float:
    """Execute nb in out_dir (as nbval and JupyterLab run it), strip it, write out_dir/<stem>.ipynb."""
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if execute:
        fd, glue_file = tempfile.mkstemp(prefix=f"{stem}-glue-", suffix=".json")
        os.close(fd)
        os.environ[GLUE_ENV] = glue_file  # the kernel inherits it: its glue() calls record there
        os.environ[TEXT_ENV] = "1"  # and its figures' and widgets' words go into their outputs' metadata (drawn.py)
        try:
            NotebookClient(nb, timeout=600, kernel_name="python3",
                           resources={"metadata": {"path": str(out_dir)}}).execute()
            fill_glue(nb, stem, recorded(Path(glue_file)))
        except CellExecutionError as e:  # keep the partial notebook to look at ({glue} unfilled); go on
            print(f"{stem}: FAILED\n{str(e)[-3000:]}", file=sys.stderr)
        finally:
            os.environ.pop(GLUE_ENV, None)
            os.environ.pop(TEXT_ENV, None)
            Path(glue_file).unlink(missing_ok=True)
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
    unknown = [a for a in argv if a.startswith("-") and a not in ("--no-exec", "--lang", "--update")]
    if unknown:
        sys.exit(f"build.py: unknown option {unknown[0]} (options: --no-exec, --lang CODE, --update; -h for help)")
    execute = "--no-exec" not in argv
    lang = argv[argv.index("--lang") + 1] if "--lang" in argv else "en"
    if lang != "en" and lang not in EDITIONS:
        sys.exit(f"build.py: unknown edition {lang!r}; available: en, {', '.join(EDITIONS)}")
    if "--update" in argv and lang == "en":
        sys.exit("build.py: --update merges the English into an edition's catalogs: name it (--lang zh-TW)")
    wanted = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] != "--lang")]
    srcs = sorted(SRC.glob("7.*.py"))
    sols = sorted((HERE / "solutions").glob("7.*.ipynb")) if lang != "en" else []
    if wanted:  # "7.2" names the chapter notebook; "7.2-exercises" (or "exercises") its exercises
        srcs = [s for s in srcs if any(s.stem.startswith(w) for w in wanted if "exercises" not in w)]
        sols = [s for s in sols if any(s.stem.startswith(w) or w == "exercises" for w in wanted if "exercises" in w)]
    try:
        if "--update" in argv:
            for s in [*srcs, *sols]:
                print(editions.update(s.stem, lang))
            return
        for s in srcs:
            took = build(s, execute, lang)
            print(f"{lang}/{s.stem}.ipynb  {took:5.1f} s", flush=True)
        for s in sols:
            took = build_solution(s, lang, execute)
            print(f"{lang}/solutions/{s.stem}.ipynb  {took:5.1f} s", flush=True)
    except (EditionError, editions.CatalogError) as e:
        sys.exit(f"build.py: {e}")
    if srcs and execute:  # the teacher's handbook counts the built lessons: its tables follow them
        import handbook
        for path in handbook.write():
            print(f"wrote {path}")
    if sols:  # the handed-out notebooks of this edition, as generate makes the English ones
        from tinyserve.classroom import generate
        generate.main(["--solutions", str(HERE / lang / "solutions"), "--exercises", str(HERE / lang / "exercises")])


if __name__ == "__main__":
    main(sys.argv[1:])
