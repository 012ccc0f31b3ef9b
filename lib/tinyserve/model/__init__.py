"""The tiny GPT (torch): step (a step's inputs: KVCache, build_step), gpt (the modules), runner (the one place a step
runs: KV slabs, segments, sampling), checkpoint (safetensors loading and saving); each file imports only the ones
before it.

The old module tinyserve.model's names (TinyGPT, load_model, build_step, KVCache, ...) load on first use
(PEP 562), so `import tinyserve.model.<module>` does not load the others.
"""
from __future__ import annotations

import importlib

_HOMES = ("gpt", "runner", "checkpoint")


def __getattr__(name: str):
    """A name of the old tinyserve.model module, from the module it lives in now."""
    for home in _HOMES:
        mod = importlib.import_module(f".{home}", __name__)
        if hasattr(mod, name):
            return getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")  # words: ok (Python's own message)


def __dir__() -> list[str]:
    names = set(globals())
    for home in _HOMES:
        names |= set(dir(importlib.import_module(f".{home}", __name__)))
    return sorted(names)
