"""A fresh install from binder/requirements.txt, then every chapter notebook run in it: time and peak memory.

    python binder/verify.py                  # builds /tmp/batching-lab-binder-venv, writes the table below
    python binder/verify.py --venv DIR --keep-index --no-write

What Binder does, minus Docker: a new virtual environment, `pip install -r binder/requirements.txt` from the
repository root (no test dependencies: no pytest, transformers or hypothesis), then each notebook executed top
to bottom in a fresh kernel of that environment. Peak memory is the kernel's peak resident set (ru_maxrss of
the reaped kernel process); the limit is 1.5 GB per notebook (Binder gives 1-2 GB). Also checks that
`tinyserve bench` without transformers exits 2 with an install hint.

The PyTorch CPU index (download.pytorch.org/whl/cpu) cannot be reached from this build machine: by default
the `--extra-index-url` line is dropped and `torch==2.13.0+cpu` comes from pip's configured find-links
(here /opt/wheels holds that exact wheel). --keep-index installs the file unchanged (a machine online).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_MB = 1536
BEGIN, END = "<!-- verify.py: begin -->", "<!-- verify.py: end -->"

# Runs inside the fresh environment, one process per notebook: the kernel is its only child, so after it is
# shut down and reaped RUSAGE_CHILDREN's ru_maxrss is the kernel's peak (kB on Linux).
RUNNER = r"""
import json, resource, sys, time, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
t0 = time.perf_counter()
err = None
try:
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}}).execute()
except Exception as e:
    err = f"{type(e).__name__}: {str(e)[-800:]}"
secs = time.perf_counter() - t0
print(json.dumps({"seconds": secs, "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "error": err}))
"""


def notebooks() -> list[Path]:
    """Every chapter notebook of both editions (not the exercises, which are meant to fail until solved) and
    the widget demo."""
    found = sorted(ROOT.glob("chapters/*.ipynb")) + sorted(ROOT.glob("chapters/zh-TW/*.ipynb"))
    demo = ROOT / "widgets" / "demo.ipynb"
    return found + ([demo] if demo.exists() else [])


def build(venv: Path, keep_index: bool) -> float:
    """A new venv with binder/requirements.txt installed; returns seconds taken."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    req = ROOT / "binder" / "requirements.txt"
    with tempfile.TemporaryDirectory() as tmp:
        if not keep_index:  # the same file without the index line; `-r` made absolute, since it moved
            lines = [x.replace("-r ../", f"-r {ROOT}/") for x in req.read_text().splitlines(True)
                     if not x.startswith("--extra-index-url")]
            req = Path(tmp) / "requirements-offline.txt"
            req.write_text("".join(lines))
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "-r", str(req)], cwd=ROOT, check=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, default=Path("/tmp/batching-lab-binder-venv"))
    ap.add_argument("--reuse", action="store_true", help="skip the install (venv already built)")
    ap.add_argument("--keep-index", action="store_true", help="keep the PyTorch CPU index line (online)")
    ap.add_argument("--no-write", action="store_true", help="do not update binder/README.md")
    a = ap.parse_args()
    py = str(a.venv / "bin" / "python")
    install_s = None if a.reuse else build(a.venv, a.keep_index)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = str(a.venv / "bin") + os.pathsep + env["PATH"]
    freeze = subprocess.run([py, "-m", "pip", "freeze"], capture_output=True, text=True, env=env).stdout
    torch_line = next((x for x in freeze.splitlines() if x.startswith("torch==")), "torch: missing")
    absent = [m for m in ("pytest", "transformers", "hypothesis", "nbval") if f"\n{m}==" in "\n" + freeze.lower()]
    bench = subprocess.run([py, "-m", "tinyserve", "bench"], capture_output=True, text=True, env=env)
    rows, ok = [], not absent and bench.returncode == 2 and "pip install" in bench.stderr
    for nb in notebooks():
        out = subprocess.run([py, "-c", RUNNER, str(nb), str(nb.parent)], capture_output=True, text=True, env=env,
                             cwd=nb.parent)
        try:
            r = json.loads(out.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            r = {"seconds": float("nan"), "peak_mb": float("nan"), "error": out.stderr[-800:]}
        r["notebook"] = str(nb.relative_to(ROOT))
        r["ok"] = r["error"] is None and r["peak_mb"] <= LIMIT_MB
        ok &= r["ok"]
        rows.append(r)
        print(f"{r['notebook']:40s} {r['seconds']:6.1f} s {r['peak_mb']:7.0f} MB  {'ok' if r['ok'] else r['error']}",
              flush=True)
    load = os.getloadavg()[0]
    lines = [f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `python binder/verify.py` on "
             f"{os.cpu_count()} CPU cores (load average {load:.1f}: the machine was shared with other jobs, so "
             "times are upper bounds; peak memory does not depend on load).",
             f"Fresh environment: {torch_line}; test-only packages installed: {', '.join(absent) or 'none'}; "
             + (f"install {install_s:.0f} s; " if install_s else "")
             + f"`tinyserve bench` without transformers: exit {bench.returncode}, "
             f"\"{bench.stderr.strip().splitlines()[-1] if bench.stderr.strip() else ''}\".", "",
             "| notebook | time (s) | kernel peak memory (MB) | ≤ 1.5 GB, no error |", "|---|---|---|---|"]
    lines += [f"| {r['notebook']} | {r['seconds']:.1f} | {r['peak_mb']:.0f} | {'yes' if r['ok'] else 'NO'} |"
              for r in rows]
    table = "\n".join(lines)
    print("\n" + table)
    if not a.no_write:
        readme = ROOT / "binder" / "README.md"
        text = readme.read_text()
        if BEGIN in text and END in text:
            text = text[:text.index(BEGIN) + len(BEGIN)] + "\n" + table + "\n" + text[text.index(END):]
        else:
            text += f"\n{BEGIN}\n{table}\n{END}\n"
        readme.write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
