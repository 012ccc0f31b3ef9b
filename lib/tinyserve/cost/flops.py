"""The flops of a step's two kinds of arithmetic, written once: the pricing and the lessons' roofline both use them.

Each multiply-add is 2 flops. A token goes through every non-embedding parameter once (the linear layers); a
query-key pair costs QK^T and AV in every layer, attn_dim multiply-adds each.
"""
from __future__ import annotations

from .presets import HardwarePreset


def linear_flops(hw: HardwarePreset, tokens: float) -> float:
    """Flops of the linear layers for `tokens` tokens: 2 x non-embedding parameters x tokens."""
    return 2.0 * hw.nonembed_params * tokens


def attn_flops_per_pair(hw: HardwarePreset) -> float:
    """Flops of attention for one query-key pair: QK^T and AV, 2 x attn_dim each, in every layer."""
    return 4.0 * hw.n_layer * hw.attn_dim
