"""Old module paths, kept importable: `tinyserve.policies` is `tinyserve.core.scheduling`, the same module object.

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
    "requests": "core.request", "config": "core.config", "cache": "core.kv", "policies": "core.scheduling",
    "variants": "core.scheduling.variants", "workloads": "core.workloads",
    "tokenizer": "core.tokenizer", "clock": "cost.clock", "report": "trace.report",
    "sweeps": "analysis.sweeps", "figures": "analysis.figures",
    "cli": "tools.cli", "bench": "tools.bench", "replay": "tools.replay", "hf": "tools.hf", "train": "tools.train",
    "calibration": "tools.calibrate", "validation": "tools.validate",
    "core.run": "loop",  # the step loop left core/ (it needs the clock and the record, which sit above core)
}

# names an old module had that now live one layer up (the preset lookup moved to cost/): set on the module object
# when it is imported by its old name, so `from tinyserve.cache import sequences_that_fit` keeps working
MOVED_NAMES = {"cache": {"sequences_that_fit": "cost.kvfit", "KVFit": "cost.kvfit"}}


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module of its new name."""

    def __init__(self, new: str, names: dict[str, str]):
        self.new, self.names = new, names

    def create_module(self, spec):
        module = importlib.import_module(self.new)
        for name, home in self.names.items():
            if not hasattr(module, name):
                setattr(module, name, getattr(importlib.import_module(home), name))
        return module

    def exec_module(self, module) -> None:
        pass  # already executed under its new name

    def get_code(self, fullname: str):
        """For `python -m tinyserve.<old name>`: run the new module as __main__, in its own package."""
        return compile(f"import runpy\nrunpy.run_module({self.new!r}, run_name='__main__', alter_sys=True)",  # words: ok (code)
                       f"<{fullname} is {self.new}>", "exec")


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, package: str):
        self.prefix = package + "."

    def find_spec(self, fullname: str, path=None, target=None):
        if not fullname.startswith(self.prefix):
            return None
        old = fullname[len(self.prefix):]
        new = MOVED.get(old)
        if new is None:
            return None
        names = {n: self.prefix + home for n, home in MOVED_NAMES.get(old, {}).items()}
        return importlib.util.spec_from_loader(fullname, _Alias(self.prefix + new, names))


def install(package: str) -> None:
    """Make the old names of `package` importable (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(package))
