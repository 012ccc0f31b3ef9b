"""Start-up: `import tinyserve` and a dry run load neither torch nor a widget library (a fresh kernel's first
dry run would otherwise spend most of its time importing torch; benchmarks/startup.py measures it)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LIB = str(Path(__file__).resolve().parents[2] / "lib")
PROBE = """
import json, sys
import tinyserve
after_import = sorted(m for m in ("torch", "numpy", "plotly", "ipywidgets") if m in sys.modules)
t = tinyserve.run("chapter-7.1-finisher", policy="static", batch_size=32, dry_run=True)
from tinyserve.tools.cli import main
code = main(["run", "--workload", "chapter-7.3-long-prompt", "--policy", "chunked", "--dry-run", "--json"])
print(json.dumps({"after_import": after_import, "torch_after_dry_runs": "torch" in sys.modules, "code": code,
                  "wasted": t.metrics()["wasted_decode_tokens"]}))
"""


def test_import_and_dry_runs_never_import_torch():
    env = dict(os.environ, PYTHONPATH=LIB + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["after_import"] == []
    assert r["torch_after_dry_runs"] is False and r["code"] == 0
    # the dry run really ran: 31 requests of 20 tokens beside one of 2,000 in 32 static slots each compute
    # 2,000 - 20 = 1,980 decode tokens nobody reads -> 31 * 1,980 = 61,380 (chapter 7.1's fastest finisher)
    assert r["wasted"] == 31 * 1980


BAD_PROBE = """
import json, sys
from tinyserve.tools.cli import main
codes = [main(argv) for argv in [
    ["generate", "def ", "--device", "tpu"], ["generate", "def ", "--dtype", "int8"], ["generate", ""],
    ["generate", "x" * 5000], ["generate", "abc", "--max-new-tokens", "5000"],
    ["run", "--workload", "chapter-7.1-padding", "--policy", "static", "--device", "tpu", "--dry-run"],
    ["run", "--workload", "chapter-7.1-padding", "--policy", "static", "--device", "tpu"]]]
print(json.dumps({"codes": codes, "torch": "torch" in sys.modules}))
"""


def test_bad_input_answered_from_names_never_imports_torch():
    """A wrong device or dtype name, an empty prompt or one over the context: the command says so before torch
    and the weights load (2 s), the same line it said after them (tests/tools/test_cli.py has the words)."""
    env = dict(os.environ, PYTHONPATH=LIB + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", BAD_PROBE], env=env, capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r == {"codes": [2] * 7, "torch": False}, (r, out.stderr)
    assert len(out.stderr.splitlines()) == 7, out.stderr  # one line each


def test_the_shipped_checkpoint_has_the_shape_dry_runs_assume():
    """A dry run and `tinyserve generate`'s length check take GPTConfig()'s defaults as the shipped model's shape
    without loading it; config.json is what loading it reads."""
    from tinyserve.core.config import GPTConfig

    shipped = json.loads((Path(LIB) / "tinyserve" / "checkpoints" / "config.json").read_text())
    assert GPTConfig(**shipped) == GPTConfig()
