"""tinyserve: a small but real LLM batching engine (static, dynamic, continuous, chunked prefill).

    import tinyserve
    trace = tinyserve.run("chapter-7.1-finisher", policy="static", batch_size=32)
    trace.metrics()
"""
from __future__ import annotations

from . import _moved
from .errors import TinyserveError
from .lang import language, set_language

_moved.install(__name__)  # the flat layout's module paths (tinyserve.engine, ...) stay importable

__version__ = "0.1.0"
__all__ = ["TinyserveError", "language", "run", "set_language", "shared_engine", "__version__"]

_engines: dict = {}


def shared_engine(device: str = "auto", dtype: str = "float32"):
    """A shared Engine on the shipped model (loaded once per device and dtype)."""
    from .engine import Engine

    key = (device, dtype)
    if key not in _engines:
        _engines[key] = Engine(device=device, dtype=dtype)
    return _engines[key]


def run(workload, policy: str = "continuous", *, device: str = "auto", dtype: str = "float32", **knobs):
    """Run a workload (name, FILE.jsonl or list of Requests) under a policy; returns the Trace."""
    return shared_engine(device, dtype).run(workload, policy, **knobs)
