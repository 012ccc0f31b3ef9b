"""The tiny GPT's shape and the dtypes' sizes, without torch: a dry run plans with these and never loads torch
(importing torch is most of a fresh kernel's first dry run: benchmarks/startup.py)."""
from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES = {"float32": 4, "float64": 8, "bfloat16": 2}  # bytes per element, for KV sizes


@dataclass
class GPTConfig:
    """Shape of the model; the defaults are the shipped checkpoint's."""

    vocab_size: int = 258  # 256 bytes + BOS + EOS
    n_positions: int = 4096  # long enough for the chapter's 4,000-token prompts
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for k in ("vocab_size", "n_positions", "n_layer", "n_head", "n_embd"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{k} must be a positive integer, got {v!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        eps = self.layer_norm_eps
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
            raise ValueError(f"layer_norm_eps must be a number in (0, 1), got {eps!r}")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head
