"""TinyGPT: the GPT-2 architecture, small enough for a laptop CPU, with a forward over a ragged step, and its
weights (load_model, save_model: safetensors + config.json, nothing is ever unpickled; nanoGPT's model.py keeps
from_pretrained beside the model the same way).

A *ragged step* is what a batching engine hands the model each iteration: several sequences at once, each
contributing a range of new tokens (a whole prompt, a prefill chunk or one decode token) at its own positions,
reading and writing its own KV slab. The linear layers run once over all the step's tokens concatenated;
attention is done per sequence against that sequence's own cache (decodes are batched into one call).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..core.config import GPTConfig, check_device, check_load_dtype  # in core/, torch-free: a dry run needs no torch
from ..core.request import check_length
from ..core.tokenizer import EOS
from ..errors import TinyserveError
from ..lang import t
from .step import PagedKV, SlabKV, StepInput

KV = SlabKV | PagedKV  # a step's K/V, of either layout (model/step.py)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]  # (q, k, v) -> y, each (..., H, hd)


class Attention(nn.Module):
    """Multi-head self-attention; `attend` says who attends to whom (causal over a sequence, or a ragged step)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.head_dim
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor, attend: Attend) -> torch.Tensor:
        """x (..., C) -> (..., C): q, k, v split per head (..., H, hd), attended, projected back."""
        q, k, v = self.c_attn(x).unflatten(-1, (3, self.n_head, self.head_dim)).unbind(-3)
        return self.c_proj(attend(q, k, v).flatten(-2))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attention(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, attend: Attend) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), attend)
        return x + self.mlp(self.ln_2(x))


def causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Every position of each sequence attends to itself and the positions before it: (B, T, H, hd) each."""
    y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return y.transpose(1, 2)


def ragged(s: StepInput, kv: KV, kc: torch.Tensor, vc: torch.Tensor) -> Attend:
    """A ragged step's attention for one layer: store the new K/V in the cache (kc, vc: that layer's, kv: its
    layout, which stores and reads them), then each decode group attends over its slots' keys and each prefill
    segment over its own. (N, H, hd) each. The outputs come in row order (decode groups, then prefills), so they
    are joined, not scattered."""

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if s.n_write:
            kv.store(s, kc, vc, k[:s.n_write], v[:s.n_write])
        parts = []
        for g in s.decode_groups:
            qd = (q[g.row:g.row + g.n] if g.pick is None else q.index_select(0, g.pick)).unsqueeze(2)
            # one call over the group's rows, or (paged) a batch of rows at a time, each attended as it is gathered
            ys = [F.scaled_dot_product_attention(qd[rows], kd, vd, attn_mask=g.mask[rows])
                  for rows, kd, vd in kv.decode_kv(g, kc, vc, g.mask.shape[-1])]
            yd = (ys[0] if len(ys) == 1 else torch.cat(ys)).squeeze(2)
            parts.append(yd if g.keep is None else yd.index_select(0, g.keep))
        for i, (row, n, slot, start) in enumerate(s.prefills):
            qs = q[row:row + n].transpose(0, 1).unsqueeze(0)  # (1, H, n, hd)
            if slot < 0:  # padding: attends to itself only, stored nowhere
                ks = k[row:row + n].transpose(0, 1).unsqueeze(0)
                vs = v[row:row + n].transpose(0, 1).unsqueeze(0)
            else:
                ks, vs = kv.prefill_kv(s, i, kc, vc)
            if start == 0 or slot < 0:
                ys = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
            else:
                allowed = torch.arange(start + n, device=q.device)[None, :] <= (
                    torch.arange(n, device=q.device)[:, None] + start)
                ys = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=allowed)
            parts.append(ys[0].transpose(0, 1))
        return torch.cat(parts) if len(parts) > 1 else parts[0]

    return attend


class TinyGPT(nn.Module):
    """GPT-2: learned positions, pre-LayerNorm, GELU(tanh), tied input/output embeddings."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.apply(self._init)
        for b in self.h:  # GPT-2's scaled init of residual projections
            for p in (b.attn.c_proj.weight, b.mlp.c_proj.weight):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    @property
    def device(self) -> torch.device:
        return self.wte.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.wte.weight.dtype

    def num_params(self) -> int:
        """Parameter count (the output head is tied to wte, so counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Full-sequence forward (training, reference): (B, T) token ids -> (B, T, vocab) logits."""
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.h:
            x = b(x, causal)
        return self.ln_f(x) @ self.wte.weight.T

    @torch.inference_mode()
    def forward_step(self, s: StepInput, kv: KV) -> torch.Tensor:
        """One ragged step: every linear layer runs once over all N tokens; returns logits of s.logits_rows."""
        x = self.wte(s.input_ids) + self.wpe(s.positions)
        for g in s.decode_groups:  # masks come in build_step's dtype (the runner gives the model's); else once here
            if g.mask.dtype != x.dtype:
                g.mask = g.mask.to(x.dtype)
        for layer, b in enumerate(self.h):
            x = b(x, ragged(s, kv, kv.k[layer], kv.v[layer]))
        return self.ln_f(x[s.logits_rows]) @ self.wte.weight.T

    @torch.inference_mode()
    def generate(self, prompt: list[int], max_new_tokens: int, stop_at_eos: bool = True, eos: int = EOS) -> list[int]:
        """Greedy continuation of one prompt through its own KV slab: the 'running alone' reference path (the
        engine's steps run through model/runner.py's ModelRunner: the same indexing and forward_step)."""
        check_length(len(prompt), max_new_tokens, self.config.n_positions)
        kv = SlabKV(self.config, 1, len(prompt) + max_new_tokens, self.dtype, self.device)
        out: list[int] = []
        seg = (0, 0, list(prompt))
        for _ in range(max_new_tokens):
            tok = self.forward_step(kv.build([seg], [True]), kv).argmax(-1).tolist()[0]
            out.append(tok)
            if stop_at_eos and tok == eos:
                break
            seg = (0, seg[1] + len(seg[2]), [tok])
        return out


# ---- the weights: loading and saving (safetensors + config.json), device and dtype ----------------------------
CHECKPOINT_DIR = Path(__file__).parents[1] / "checkpoints"
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' -> cuda when present, else cpu; 'cuda' without a GPU is an error."""
    check_device(device)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise TinyserveError(t("engine.device.no_cuda"))
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """float32 | float64 | bfloat16 (bfloat16 on CUDA only)."""
    check_load_dtype(dtype)
    if dtype == "bfloat16" and device.type != "cuda":
        raise TinyserveError(t("engine.dtype.bfloat16"))
    return DTYPES[dtype]


def load_model(path: str | Path | None = None, device: str = "auto", dtype: str = "float32") -> TinyGPT:
    """Load a checkpoint directory (config.json + model.safetensors); the shipped one by default."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path) if path is not None else CHECKPOINT_DIR
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    cfg_file, weights = path / "config.json", path / "model.safetensors"
    for f in (cfg_file, weights):
        if not f.is_file():
            raise TinyserveError(t("engine.checkpoint.missing", file=f))
    try:
        cfg = GPTConfig(**json.loads(cfg_file.read_text()))
        state = load_file(str(weights))
        model = TinyGPT(cfg)
        model.load_state_dict(state)
    except (ValueError, TypeError, RuntimeError, OSError, SafetensorError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0][:200]
        raise TinyserveError(t("engine.checkpoint.corrupt", path=path, first=first))
    return model.to(device=dev, dtype=dt).eval()


def save_model(model: TinyGPT, path: str | Path) -> None:
    """Write config.json + model.safetensors in float32 (the shipped format; the tied head is stored once, as wte)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(asdict(model.config), indent=2) + "\n")
    state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path / "model.safetensors"))
