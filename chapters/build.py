"""Build the notebooks (7.0-7.4, the gallery 7.5, the evidence appendix 7.6) from chapters/src/, executed.

    OMP_NUM_THREADS=1 python chapters/build.py            # all notebooks: every src/7.*.py
    OMP_NUM_THREADS=1 python chapters/build.py 7.1 7.3    # some
    python chapters/build.py --no-exec 7.2                # write without running (outputs empty)

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
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


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


def clean(nb) -> None:
    """Drop widget state and execution timestamps; keep outputs and execution counts."""
    nb.metadata.pop("widgets", None)
    for c in nb.cells:
        c.metadata.pop("execution", None)
        c.pop("id", None)
    nb.nbformat, nb.nbformat_minor = 4, 4


def build(src: Path, execute: bool = True) -> float:
    """Write chapters/<name>.ipynb from src (executed unless told not to); returns the run time in seconds."""
    nb = nbformat.v4.new_notebook()
    nb.cells = parse(src.read_text(encoding="utf-8"))
    nb.metadata["kernelspec"] = KERNEL
    nb.metadata["language_info"] = {"name": "python"}
    t0 = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if execute:
        try:
            NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
        except CellExecutionError as e:  # keep the partial notebook to look at; report and go on
            print(f"{src.stem}: FAILED\n{str(e)[-3000:]}", file=sys.stderr)
    took = time.perf_counter() - t0
    slow = []
    for i, c in enumerate(nb.cells):
        ex = c.metadata.get("execution", {})
        if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            from datetime import datetime
            d = (datetime.fromisoformat(ex["shell.execute_reply"].replace("Z", "+00:00"))
                 - datetime.fromisoformat(ex["iopub.execute_input"].replace("Z", "+00:00"))).total_seconds()
            slow.append((d, i))
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the kernel is our child: its CPU time and peak memory
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    print(f"{src.stem}: kernel CPU {cpu:.1f} s, largest child's peak RSS {cpu1.ru_maxrss / 1024:.0f} MB")
    if slow:
        print(f"{src.stem}: slowest cells " + ", ".join(f"#{i} {d:.1f}s" for d, i in sorted(slow)[::-1][:4]))
    clean(nb)
    out = HERE / f"{src.stem}.ipynb"
    out.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return took


def main(argv: list[str]) -> None:
    execute = "--no-exec" not in argv
    wanted = [a for a in argv if not a.startswith("--")]
    srcs = sorted(SRC.glob("7.*.py"))
    if wanted:
        srcs = [s for s in srcs if any(s.stem.startswith(w) for w in wanted)]
    for s in srcs:
        took = build(s, execute)
        print(f"{s.stem}.ipynb  {took:5.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
