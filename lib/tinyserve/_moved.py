"""Old module paths, kept importable: `tinyserve.policies` is `tinyserve.core.policies`, the same module object.

Notebooks, exercises, students' submissions and the README import the flat layout this package had before it was
split into layers (`from tinyserve.policies import Plan, Policy, decode_work`). An alias, not a copy: the module
is loaded once under its new name and also registered under the old one, so classes, monkeypatching and private
names behave the same through either path. `python -m tinyserve.cli` (or any old name) runs the new module.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {  # old name under tinyserve -> new name
    "requests": "core.request", "config": "core.config", "cache": "core.kv", "policies": "core.policies",
    "variants": "core.policies.variants", "workloads": "core.workloads",
    "tokenizer": "core.tokenizer", "clock": "cost.clock", "report": "trace.report",
    "sweeps": "analysis.sweeps", "figures": "analysis.figures",
    "cli": "tools.cli", "bench": "tools.bench", "replay": "tools.replay", "hf": "tools.hf", "train": "tools.train",
    "calibration": "tools.calibrate", "validation": "tools.validate",
}


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module of its new name."""

    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:
        pass  # already executed under its new name

    def get_code(self, fullname: str):
        """For `python -m tinyserve.<old name>`: run the new module as __main__, in its own package."""
        return compile(f"import runpy\nrunpy.run_module({self.new!r}, run_name='__main__', alter_sys=True)",
                       f"<{fullname} is {self.new}>", "exec")


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, package: str):
        self.prefix = package + "."

    def find_spec(self, fullname: str, path=None, target=None):
        if not fullname.startswith(self.prefix):
            return None
        new = MOVED.get(fullname[len(self.prefix):])
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(self.prefix + new))


def install(package: str) -> None:
    """Make the old names of `package` importable (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(package))
