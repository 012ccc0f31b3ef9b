"""TinyGPT: the GPT-2 architecture, small enough for a laptop CPU, with a forward over a ragged step, and the step
it computes: its index tensors (StepInput) and the KV tensors it reads and writes, one class per layout.

A *ragged step* is what a batching engine hands the model each iteration: several sequences at once, each
contributing a range of new tokens (a whole prompt, a prefill chunk or one decode token) at its own positions,
reading and writing its own KV slab. The linear layers run once over all the step's tokens concatenated;
attention is done per sequence against that sequence's own cache (decodes are batched into one call).

The step (below the model; nano-vllm's prepare step, vLLM's names: slot_mapping, block_tables, context_lens):
SlabKV, a slab per slot, indexed by build_step; PagedKV, a block pool, indexed through block tables by
build_paged_step. Each stores and reads its own K/V for the attention, which never asks which one it has; the KV
pool (core/) names the class its runner gets. runner.py makes them for the engine's steps, generate for one
sequence alone.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..core.blocks import blocks_for
from ..core.config import GPTConfig  # in core/, torch-free: a dry run reads the shape without torch
from ..core.kv import GROUP_CALL_COST_CUDA, group_decodes, kv_bytes_per_token
from ..core.request import check_length
from ..core.tokenizer import EOS


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


# ---- the step: its index tensors and each layout's K/V ------------------------------------------------------
@dataclass
class DecodeGroup:
    """Decodes in the slot range [lo, hi): one attention call over a view of their slabs, keys [0, T).

    Their rows are consecutive (build_step puts the decodes first, in slot order): [row, row + n). A range with
    slots that do not decode (holes) reads its queries through `pick` (a row for every slot of the range; a hole
    borrows the first row and its output is dropped) and keeps its decodes' outputs through `keep`."""

    lo: int
    hi: int
    row: int
    n: int
    mask: torch.Tensor  # (hi - lo, 1, 1, T) float: 0 = attend, -inf = not (built once per step, not per layer)
    pick: torch.Tensor | None = None
    keep: torch.Tensor | None = None
    tables: torch.Tensor | None = None  # paged: (n, blocks) block ids its keys are gathered through
    reads: list | None = None  # paged: its reads (PagedKV.Read), planned at the first layer, made at every layer


@dataclass
class StepInput:
    """One ragged step, as index tensors the model can use without Python loops over tokens.

    Rows are the step's tokens concatenated: the decodes first, in slot order (so each decode group's queries
    are a slice, not a gather), then the prefill segments, then padding. Decode rows (one token each, slot >= 0)
    attend to their slabs in a few batched calls, each over a range of neighbouring slots; each prefill segment
    attends on its own. A segment with slot -1 is padding: computed, attending only to itself, never stored.
    Rows [0, n_write) are the ones whose K/V are stored.
    """

    input_ids: torch.Tensor  # (N,) long
    positions: torch.Tensor  # (N,) long
    n_write: int
    write_slots: torch.Tensor
    write_pos: torch.Tensor
    decode_groups: list[DecodeGroup]
    prefills: list[tuple[int, int, int, int]]  # (row_start, n_tokens, slot, start_pos), in row order
    logits_rows: torch.Tensor  # rows whose next-token logits are wanted, in the segments' order
    prefill_tables: list | None = None  # paged: each prefill's block ids (a tensor; None for padding)
    prefill_reads: dict | None = None  # paged: prefill i's read (PagedKV.Read), planned at the first layer


def _row_order(segments: list[tuple[int, int, list[int]]]) -> list[int]:
    """Segment indices in row order: decodes by slot, then prefills as given, then padding."""
    def key(i: int) -> tuple[int, int]:
        slot, _, toks = segments[i]
        return (2, i) if slot < 0 else (0, slot) if len(toks) == 1 else (1, i)
    return sorted(range(len(segments)), key=key)


def _pack(device, *lists: list[int]) -> tuple[torch.Tensor, ...]:
    """Long tensors of several int lists, made in one call (each torch.tensor call costs ~5 us): views of one."""
    flat = [x for xs in lists for x in xs]
    return torch.tensor(flat, dtype=torch.long, device=device).split([len(xs) for xs in lists])


def _masks(ctxs: list[list[int]], lens: torch.Tensor, dtype: torch.dtype,
           widths: list[int] | None = None) -> list[torch.Tensor]:
    """One additive mask per decode group, (len(ctx), 1, 1, width): row i attends to keys [0, ctx[i]); width is
    max(ctx) unless given. lens: the ctxs flattened, as a tensor. Views of one tensor: a few ops per step, not five
    per group."""
    widths = widths or [max(ctx) for ctx in ctxs]
    T = max(widths)
    m = torch.zeros(len(lens), T, dtype=dtype, device=lens.device)
    m.masked_fill_(torch.arange(T, device=lens.device)[None, :] >= lens[:, None], float("-inf"))
    out, a = [], 0
    for ctx, width in zip(ctxs, widths):  # as_strided: one call per view (indexing with None costs ~10 us)
        out.append(m.as_strided((len(ctx), 1, 1, width), (T, T, T, 1), a * T))
        a += len(ctx)
    return out


def _rows(segments: list[tuple[int, int, list[int]]], sample: list[bool]):
    """What both layouts' indexing shares: the rows (input_ids, positions), the stored segments (slot, start, n)
    in row order, the decodes (row, slot, context_len) by slot, the prefills and the rows whose logits are wanted."""
    ids: list[int] = []
    pos: list[int] = []
    stored: list[tuple[int, int, int]] = []
    dec: list[tuple[int, int, int]] = []  # (row, slot, context length), by slot
    prefills: list[tuple[int, int, int, int]] = []
    last_row = [0] * len(segments)
    for i in _row_order(segments):
        slot, start, toks = segments[i]
        row, n = len(ids), len(toks)
        ids.extend(toks)
        pos.extend(range(start, start + n))
        if slot >= 0:
            stored.append((slot, start, n))
        if n == 1 and slot >= 0:
            dec.append((row, slot, start + 1))
        else:
            prefills.append((row, n, slot, start))
        last_row[i] = row + n - 1
    logit_rows = [r for r, want in zip(last_row, sample) if want]
    return ids, pos, stored, dec, prefills, logit_rows


def _call_cost(device: torch.device) -> int | None:
    """What one more attention call costs on this device, in slot-keys (core/kv.py: group_decodes)."""
    return GROUP_CALL_COST_CUDA if torch.device(device).type == "cuda" else None


def build_step(segments: list[tuple[int, int, list[int]]], sample: list[bool], device: torch.device,
               dtype: torch.dtype = torch.float32) -> StepInput:
    """The slab layout's StepInput of [(slot, start_pos, token_ids)]; sample[i] asks for segment i's last logits.
    slot_mapping: (slot, position); each decode group reads a view of its slots' slabs. dtype: the masks'."""
    ids, pos, stored, dec, prefills, logit_rows = _rows(segments, sample)
    wr_slots: list[int] = []
    wr_pos: list[int] = []
    for slot, start, n in stored:
        wr_slots.extend([slot] * n)
        wr_pos.extend(range(start, start + n))
    grouped = group_decodes(dec, _call_cost(device))
    ctxs, pick, keep = [], [], []  # every group's key counts, and the rows of one pick / keep tensor
    for g in grouped:
        lo, hi, row = g[0][1], g[-1][1] + 1, g[0][0]
        ctx = [1] * (hi - lo)  # slots in the range that do not decode see one (ignored) key
        rows = [row] * (hi - lo)
        for r, slot, c in g:
            ctx[slot - lo], rows[slot - lo] = c, r
        ctxs.append(ctx)
        if len(g) < hi - lo:  # holes
            pick.extend(rows)
            keep.extend(slot - lo for _, slot, _ in g)
    ids_t, pos_t, slots_t, wpos_t, logits_t, pick_t, keep_t, lens_t = _pack(
        device, ids, pos, wr_slots, wr_pos, logit_rows, pick, keep, [c for ctx in ctxs for c in ctx])
    groups, p0, k0 = [], 0, 0
    for g, ctx, mask in zip(grouped, ctxs, _masks(ctxs, lens_t, dtype) if grouped else []):
        lo, n = g[0][1], len(g)
        if n < len(ctx):
            groups.append(DecodeGroup(lo, lo + len(ctx), g[0][0], n, mask, pick_t[p0:p0 + len(ctx)],
                                      keep_t[k0:k0 + n]))
            p0, k0 = p0 + len(ctx), k0 + n
        else:
            groups.append(DecodeGroup(lo, lo + n, g[0][0], n, mask))
    return StepInput(ids_t, pos_t, len(wr_slots), slots_t, wpos_t, groups, prefills, logits_t)


def build_paged_step(segments: list[tuple[int, int, list[int]]], sample: list[bool], device: torch.device,
                     tables: dict[int, list[int]], block_size: int, dtype: torch.dtype = torch.float32) -> StepInput:
    """The paged layout's StepInput: slot_mapping (block, offset) through each slot's block table (tables); the
    same decode groups, each a batch of its decodes' keys gathered through their block tables (padded with block 0
    and masked), and each prefill's table."""
    ids, pos, stored, dec, prefills, logit_rows = _rows(segments, sample)
    wr_slots: list[int] = []
    wr_pos: list[int] = []
    for slot, start, n in stored:
        table = tables[slot]
        wr_slots.extend(table[p // block_size] for p in range(start, start + n))
        wr_pos.extend(p % block_size for p in range(start, start + n))
    grouped = group_decodes(dec, _call_cost(device))
    nbs = [blocks_for(max(c for _, _, c in g), block_size) for g in grouped]
    ctxs = [[c for _, _, c in g] for g in grouped]
    tabs = [tables[slot][:nb] + [0] * (nb - min(nb, len(tables[slot]))) for g, nb in zip(grouped, nbs)
            for _, slot, _ in g]
    ptabs = [tables[slot][:blocks_for(start + n, block_size)] for _, n, slot, start in prefills if slot >= 0]
    ids_t, pos_t, slots_t, wpos_t, logits_t, lens_t, tabs_t, *ptabs_t = _pack(
        device, ids, pos, wr_slots, wr_pos, logit_rows, [c for ctx in ctxs for c in ctx],
        [b for tab in tabs for b in tab], *ptabs)
    groups, a = [], 0
    masks = _masks(ctxs, lens_t, dtype, [nb * block_size for nb in nbs]) if grouped else []  # keys of whole blocks
    for g, nb, mask in zip(grouped, nbs, masks):
        groups.append(DecodeGroup(0, len(g), g[0][0], len(g), mask,
                                  tables=tabs_t[a:a + len(g) * nb].view(len(g), nb)))
        a += len(g) * nb
    it = iter(ptabs_t)
    ptabs_all = [None if slot < 0 else next(it) for _, _, slot, _ in prefills]
    return StepInput(ids_t, pos_t, len(wr_slots), slots_t, wpos_t, groups, prefills, logits_t, ptabs_all)


def _zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zeroed tensor; on a CPU through numpy's calloc, so the OS hands out zero pages as they are first touched
    (torch.zeros writes every byte up front: ~15 ms for each of K and V of a 32-slot run, most never used)."""
    if torch.device(device).type == "cpu" and dtype in (torch.float32, torch.float64):
        return torch.from_numpy(np.zeros(shape, dtype=np.float32 if dtype == torch.float32 else np.float64))
    return torch.zeros(shape, dtype=dtype, device=device)


class SlabKV:
    """The slab layout's K/V: one slab per slot, K and V for every layer, reserved at max_len positions (Ch. 7's
    layout), (layers, slots, heads, max_len, head_dim). It builds the slab StepInput and stores and reads through
    it; the model calls it without asking which layout it is (PagedKV is the paged one)."""

    def __init__(self, cfg: GPTConfig, num_slots: int, max_len: int, dtype: torch.dtype, device: torch.device):
        shape = (cfg.n_layer, num_slots, cfg.n_head, max_len, cfg.head_dim)
        # zeros, not empty: masked-out keys are multiplied by 0, and 0 * NaN from stale memory would be NaN
        self.k, self.v = _zeros(shape, dtype, device), _zeros(shape, dtype, device)
        self.num_slots, self.max_len = num_slots, max_len
        self.bytes_per_token = kv_bytes_per_token(cfg.n_layer, cfg.n_embd, self.k.element_size())

    @property
    def slab_bytes(self) -> int:
        """Bytes one slot reserves."""
        return self.bytes_per_token * self.max_len

    def tables(self, works: list) -> None:
        """Block tables of a step's works: none, a slot's slab is its own."""
        return None

    def build(self, segments: list, sample: list[bool], tables: None = None) -> StepInput:
        """The step's index tensors (build_step)."""
        return build_step(segments, sample, self.k.device, self.k.dtype)

    @staticmethod
    def store(s: StepInput, kc: torch.Tensor, vc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write the step's new K/V (k, v: (n_write, H, hd)) into one layer's slabs (slots, H, positions, hd)."""
        kc[s.write_slots, :, s.write_pos] = k
        vc[s.write_slots, :, s.write_pos] = v

    @staticmethod
    def decode_kv(g: DecodeGroup, kc: torch.Tensor, vc: torch.Tensor, T: int) -> list[tuple[slice, torch.Tensor,
                                                                                         torch.Tensor]]:
        """A decode group's keys and values, all its rows at once (rows, k, v): a view of its slots' slabs, no copy
        (the cache is read in place)."""
        return [(slice(None), kc[g.lo:g.hi, :, :T], vc[g.lo:g.hi, :, :T])]

    @staticmethod
    def prefill_kv(s: StepInput, i: int, kc: torch.Tensor, vc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Prefill segment i's keys and values: its slab up to its last position."""
        _, n, slot, start = s.prefills[i]
        return kc[slot:slot + 1, :, :start + n], vc[slot:slot + 1, :, :start + n]

    def export(self, request, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A copy of request's positions [0, n): (n_layer, heads, n, head_dim) each, from its slot's slab."""
        if n < 1 or n > self.max_len:
            raise RuntimeError(f"{request.id}: {n} KV positions do not fit this runner")  # words: ok (a bug)
        slot = self._slot(request)  # a view, so cloned
        return self.k[:, slot, :, :n].clone(), self.v[:, slot, :, :n].clone()

    def write(self, request, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write k, v (n_layer, heads, n, head_dim) into positions [0, n) of request's slot's slab."""
        n = k.shape[2]
        if n < 1 or n > self.max_len:
            raise RuntimeError(f"{request.id}: {n} KV positions do not fit this runner")  # words: ok (a bug)
        slot = self._slot(request)
        self.k[:, slot, :, :n] = k
        self.v[:, slot, :, :n] = v

    def _slot(self, request) -> int:
        """request's slot, checked to be one of these slabs."""
        if not 0 <= request.slot < self.num_slots:
            raise RuntimeError(f"{request.id}: slot {request.slot} is not here")  # words: ok (a bug)
        return request.slot


# Keys and values (bytes, both) one paged attention call gathers at most: a decode group of more sequences is
# attended a few sequences at a time, each batch gathered into the same buffer. On a CPU about what this box's
# caches keep (1 MiB of L2 a core, 32 MiB of L3), so attention reads the copy from cache, not memory: gathered
# whole, 64 sequences of 2,048 keys were a fresh 134 MB a layer, faulted in, and the step cost 9x a slab step.
# On a GPU a call is a kernel launch and reading memory is cheap: a group is one call or a few.
GATHER_BYTES, GATHER_BYTES_CUDA = 2 * 2**20, 64 * 2**20


@dataclass
class Read:
    """One read through block tables, planned once per step and made at every layer: rows (of a decode group, or
    all of a prefill's one), the block ids (flat) copied into the buffer's views out_k, out_v, and k, v: those views
    as attention reads them, (rows, H, T, hd). The views stay valid: the buffer is never reallocated."""

    rows: slice
    ids: torch.Tensor
    out_k: torch.Tensor
    out_v: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor


class PagedKV:
    """The paged layout's K/V: a pool of num_blocks blocks of block_size positions (layers, blocks, block_size,
    heads, head_dim), written through the sequences' block tables (core/blocks.py) and read by gathering a call's
    blocks into one reused buffer (gathered), a few sequences at a time. A step's reads (ids, views) are planned at
    its first layer and only made at the others: planned anew at every layer, they cost ~30 us a layer in Python,
    as much as the copy of a short sequence."""

    def __init__(self, cfg: GPTConfig, num_blocks: int, block_size: int, dtype: torch.dtype, device: torch.device):
        # blocks first, heads inside: a block of one layer (block_size x heads x head_dim: 8 KB here) is one run of
        # memory, which the gather copies about twice as fast as the four 2 KB runs of a heads-first pool; attention
        # reads the copy, still in cache, with the heads' strides at little cost. (Read in place from memory, those
        # strides cost ~4x a slab's, so blocks that happen to be consecutive are gathered too.)
        shape = (cfg.n_layer, num_blocks, block_size, cfg.n_head, cfg.head_dim)
        self.k, self.v = _zeros(shape, dtype, device), _zeros(shape, dtype, device)  # zeros: see SlabKV
        self.num_blocks, self.block_size = num_blocks, block_size
        row = 2 * cfg.n_head * cfg.head_dim * self.k.element_size()  # K and V bytes of one position, one layer
        budget = GATHER_BYTES_CUDA if self.k.device.type == "cuda" else GATHER_BYTES
        # the buffer's positions: the budget's, or one sequence of the pool's longest context if that is more
        longest = blocks_for(min(cfg.n_positions, num_blocks * block_size), block_size) * block_size
        self.gather_positions = max(budget // row, longest)
        self._gathered: tuple[torch.Tensor, torch.Tensor] | None = None
        self.gather_allocations = 0  # buffers allocated: 1 once a run has read through its tables (tests pin it)

    def tables(self, works: list) -> dict[int, list[int]]:
        """Block tables of a step's works: slot -> its request's block ids."""
        return {w.slot: w.request.block_table for w in works}

    def build(self, segments: list, sample: list[bool], tables: dict[int, list[int]]) -> StepInput:
        """The step's index tensors through tables (slot -> block ids): build_paged_step."""
        return build_paged_step(segments, sample, self.k.device, tables, self.block_size, self.k.dtype)

    @staticmethod
    def store(s: StepInput, kc: torch.Tensor, vc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write the step's new K/V (n_write, H, hd) into one layer's pool (blocks, block_size, H, hd)."""
        kc[s.write_slots, s.write_pos] = k
        vc[s.write_slots, s.write_pos] = v

    def decode_kv(self, g: DecodeGroup, kc: torch.Tensor, vc: torch.Tensor, T: int
                  ) -> Iterator[tuple[slice, torch.Tensor, torch.Tensor]]:
        """A decode group's keys and values, a batch of its rows at a time: (rows, k, v) per batch, gathered through
        the rows' tables into the one buffer, so each batch must be attended before the next is asked for. The
        batches and their views are planned at the group's first layer; every layer then only copies."""
        if g.reads is None:
            n, per = g.tables.shape[0], max(1, self.gather_positions // T)
            g.reads = [self.plan(g.tables[a:a + per], T, slice(a, min(n, a + per))) for a in range(0, n, per)]
        for r in g.reads:
            yield (r.rows,) + self.gather(kc, vc, r)

    def prefill_kv(self, s: StepInput, i: int, kc: torch.Tensor, vc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Prefill segment i's keys and values, gathered through its block table (into the buffer)."""
        if s.prefill_reads is None:
            s.prefill_reads = {}
        r = s.prefill_reads.get(i)
        if r is None:
            _, n, _, start = s.prefills[i]
            r = s.prefill_reads[i] = self.plan(s.prefill_tables[i][None], start + n, slice(None))
        return self.gather(kc, vc, r)

    def plan(self, tables: torch.Tensor, T: int, rows: slice) -> Read:
        """The read of sequences through their block tables ((B, blocks) ids), T keys each: views of the reused
        buffer (allocated at the first plan) that the copy fills, (B, H, T, hd) each as attention reads them."""
        B, nb = tables.shape
        block = tuple(self.k.shape[2:])  # (block_size, heads, head_dim)
        if self._gathered is None:  # once: the buffer every later read reuses (sized above)
            size = self.gather_positions * math.prod(block) // self.block_size
            self._gathered = (torch.empty(size, dtype=self.k.dtype, device=self.k.device),
                              torch.empty(size, dtype=self.k.dtype, device=self.k.device))
            self.gather_allocations += 1
        shape = (B * nb,) + block
        outs = [buf[:math.prod(shape)].view(shape) for buf in self._gathered]
        views = [o.view(B, nb * self.block_size, *block[1:]).transpose(1, 2)[:, :, :T] for o in outs]
        return Read(rows, tables.reshape(-1), outs[0], outs[1], views[0], views[1])

    @staticmethod
    def gather(kc: torch.Tensor, vc: torch.Tensor, r: Read) -> tuple[torch.Tensor, torch.Tensor]:
        """Make read r in one layer's pool (kc, vc): one copy of whole blocks each (index_select, each block one run)
        into the buffer, no allocation; (B, H, T, hd) views of it, valid until the next gather."""
        torch.index_select(kc, 0, r.ids, out=r.out_k)
        torch.index_select(vc, 0, r.ids, out=r.out_v)
        return r.k, r.v

    def export(self, request, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A copy of request's positions [0, n), gathered through its block table: (n_layer, heads, n, hd) each."""
        blocks, offsets = self._where(request, n)  # the index gathers a new tensor
        return (self.k[:, blocks, offsets].transpose(1, 2).contiguous(),
                self.v[:, blocks, offsets].transpose(1, 2).contiguous())

    def write(self, request, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write k, v (n_layer, heads, n, head_dim) into positions [0, n) of request's table's blocks."""
        blocks, offsets = self._where(request, k.shape[2])
        self.k[:, blocks, offsets] = k.transpose(1, 2)
        self.v[:, blocks, offsets] = v.transpose(1, 2)

    def _where(self, request, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Block ids and offsets of request's positions [0, n), each (n,)."""
        if n < 1:
            raise RuntimeError(f"{request.id}: {n} KV positions do not fit this runner")  # words: ok (a bug)
        nb = blocks_for(n, self.block_size)
        table = request.block_table[:nb]
        # distinct ids too: two positions written to one place would be a silent mix of two sequences' keys
        if len(table) < nb or len(set(table)) < nb or not all(0 <= b < self.num_blocks for b in table):
            raise RuntimeError(f"{request.id}: block table {table} does not hold {n} positions")  # words: ok (a bug)
        pos = torch.arange(n, device=self.k.device)
        blocks = torch.tensor(table, dtype=torch.long, device=self.k.device)[pos // self.block_size]
        return blocks, pos % self.block_size


KV = SlabKV | PagedKV  # a step's K/V, of either layout
