"""tinyserve: a small but real LLM batching engine (static, dynamic, continuous, chunked prefill).

    import tinyserve
    trace = tinyserve.run("chapter-7.1-finisher", policy="static", batch_size=32)
    trace.metrics()

The public API is __all__: run a workload, share an engine, choose the language. Every other name has one import
path, the module that defines it: tinyserve.engine.Engine, tinyserve.core.request.Request,
tinyserve.core.config.RunConfig, tinyserve.core.scheduling.Policy (with Plan and the policies: the exercises'
face), tinyserve.trace.record.Trace (README, "Layout"). Those types are not imported here, so `import tinyserve`
stays light: no numpy, no torch (tests/core/test_startup.py).
"""
from __future__ import annotations

from .errors import TinyserveError
from .lang import language, set_language

__version__ = "0.1.0"
__all__ = ["run", "shared_engine", "set_language", "language", "TinyserveError", "__version__"]

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
