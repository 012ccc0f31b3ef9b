"""Start-up cost in a fresh interpreter (what a new notebook kernel pays): `import tinyserve`, the first dry run,
the first real-model step, and which heavy libraries each one pulled in.

    python benchmarks/startup.py [--repeats 3]

Each measurement is a new process (imports are cached after the first), medians of --repeats. A shared, busy
machine inflates every number here (torch's import reads hundreds of files): re-take on a quiet one.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
import tinyserve
t_import = time.perf_counter() - t0
heavy = lambda: [m for m in ("torch", "numpy", "tqdm", "plotly", "ipywidgets") if m in sys.modules]
after_import = heavy()
t0 = time.perf_counter()
tinyserve.run("chapter-7.1-finisher", policy="static", batch_size=32, dry_run=True)
t_dry = time.perf_counter() - t0
after_dry = heavy()
from tinyserve.engine import Engine
t0 = time.perf_counter()
run = Engine(device="cpu").start("chapter-7.2-longtail", "continuous")
while run.step() is None:
    pass
t_real = time.perf_counter() - t0
print(json.dumps({"import_s": t_import, "first_dry_run_s": t_dry, "first_real_step_s": t_real,
                  "after_import": after_import, "after_dry_run": after_dry}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "lib") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = []
    for _ in range(a.repeats):
        out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(r[k] for r in runs) for k in ("import_s", "first_dry_run_s", "first_real_step_s")}
    print(f"fresh interpreter, medians of {a.repeats}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("| step | seconds | heavy modules loaded after it |\n|---|---|---|")
    print(f"| import tinyserve | {med['import_s']:.3f} | {', '.join(runs[0]['after_import']) or 'none'} |")
    print(f"| + first dry run (7.1-finisher static, 32 slots) | {med['first_dry_run_s']:.3f} | "
          f"{', '.join(runs[0]['after_dry_run'])} |")
    print(f"| + first real step (model load + one forward) | {med['first_real_step_s']:.3f} | |")


if __name__ == "__main__":
    main()
