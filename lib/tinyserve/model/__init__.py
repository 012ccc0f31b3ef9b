"""The tiny GPT (torch): modules, the ragged step, checkpoint loading.

Its names load on first use (PEP 562), so `import tinyserve.model.<module>` does not load torch by itself.
"""
from __future__ import annotations

import importlib


def __getattr__(name: str):
    """The old module tinyserve.model's names (TinyGPT, load_model, build_step, ...), from model/gpt.py."""
    gpt = importlib.import_module(".gpt", __name__)
    try:
        return getattr(gpt, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(dir(importlib.import_module(".gpt", __name__))))
