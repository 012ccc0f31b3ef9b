"""How many sequences a hardware preset's KV memory holds: one max-length slab each, or exactly the tokens each
holds (7.4's comparison; the preset lookup lives here, in cost/, with the presets)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import TinyserveError
from ..lang import t
from .presets import HardwarePreset, get_preset


@dataclass
class KVFit:
    """How many sequences a KV memory holds: one max-length slab each, or exactly the tokens each holds."""

    memory_bytes: int  # KV memory (what is left after the weights)
    bytes_per_token: int
    slab_tokens: int  # positions every slab reserves (the maximum length)
    mean_tokens: float  # positions a sequence really holds, on average over the length distribution
    slabs: int  # sequences that fit with one slab each
    exact: int  # sequences that fit if each held only its own tokens

    @property
    def gain(self) -> float:
        """exact / slabs: how much concurrency the slab layout gives away."""
        return self.exact / self.slabs if self.slabs else math.inf


def sequences_that_fit(hardware, lengths: list[int], max_len: int | None = None) -> KVFit:
    """Sequences a preset's KV memory fits: slabs of max_len (default: the longest length) vs exact allocation.

    hardware: a preset name or HardwarePreset (its kv_bytes_per_token and kv_memory_bytes); lengths: the
    positions (prompt + output) each sequence holds, a sample of the length distribution.
    """
    hw = hardware if isinstance(hardware, HardwarePreset) else get_preset(hardware)
    if hw.kv_memory_bytes is None:
        raise TinyserveError(t("engine.fit.no_memory", name=hw.name))
    if not lengths or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in lengths):
        raise TinyserveError(t("engine.fit.lengths"))
    slab = max(lengths) if max_len is None else max_len
    if isinstance(slab, bool) or not isinstance(slab, int) or slab < max(lengths):
        raise TinyserveError(t("engine.fit.max_len", longest=max(lengths), value=max_len))
    bpt, memory = int(hw.kv_bytes_per_token), int(hw.kv_memory_bytes)
    mean = sum(lengths) / len(lengths)
    return KVFit(memory, bpt, slab, mean, memory // (slab * bpt), math.floor(memory / (mean * bpt)))
