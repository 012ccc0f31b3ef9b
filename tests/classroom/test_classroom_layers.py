"""The checks by job: importing them loads no torch, and a check cell's reload restores every part of them."""
from __future__ import annotations

import subprocess
import sys


def _python(code: str) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter (this process has torch loaded by other tests' fixtures)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_importing_the_checks_loads_no_torch():
    r = _python("import sys, tinyserve.classroom.checks\n"
                "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", f"importing tinyserve.classroom.checks loaded torch: {r.stdout}"


def test_a_check_cells_reload_restores_the_parts():
    """A check cell runs importlib.reload(checks): what a learner reassigned in any part is undone."""
    r = _python("import importlib, tinyserve.classroom.checks as checks\n"
                "from tinyserve.classroom import checks_7_1, harness, integrity, plans\n"
                "real = (harness._drive, plans._validate, integrity._guard, checks_7_1.padding_tokens)\n"
                "harness._drive = plans._validate = integrity._guard = checks_7_1.padding_tokens = None\n"
                "importlib.reload(checks)\n"
                "now = (harness._drive, plans._validate, integrity._guard, checks_7_1.padding_tokens)\n"
                "print(all(callable(f) and f.__qualname__ == g.__qualname__ for f, g in zip(now, real)))\n"
                "print(checks.padding_tokens is checks_7_1.padding_tokens,"
                " checks.IntegrityError is integrity.IntegrityError)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "True"]
