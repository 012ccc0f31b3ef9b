"""The one place a step is executed: the KV tensors, the step's segments, one forward, greedy sampling.

The engine, the calibration, the validation and the benchmark all run steps through a ModelRunner (nano-vllm's
model_runner): works -> segments -> StepInput (index tensors) -> TinyGPT.forward_step -> argmax.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch

from ..core.config import GPTConfig
from ..core.blocks import blocks_for
from ..core.kv import GROUP_CALL_COST_CUDA, group_decodes, kv_bytes_per_token
from ..core.request import Work, check_length
from ..core.tokenizer import EOS

if TYPE_CHECKING:
    from .gpt import TinyGPT


@dataclass
class DecodeGroup:
    """Decodes in the slot range [lo, hi): one attention call over a view of their slabs, keys [0, T)."""

    lo: int
    hi: int
    rows: torch.Tensor  # rows of the step's decode tokens in this group
    offsets: torch.Tensor  # their slot - lo
    mask: torch.Tensor  # (hi - lo, 1, 1, T) bool, True = attend
    tables: torch.Tensor | None = None  # paged: (hi - lo, blocks) block ids its keys are gathered through


@dataclass
class StepInput:
    """One ragged step, as index tensors the model can use without Python loops over tokens.

    Rows are the step's tokens concatenated. Decode rows (one token each, slot >= 0) attend to their slabs in a
    few batched calls, each over a range of neighbouring slots; each prefill segment attends on its own.
    A segment with slot -1 is padding: computed, attending only to itself, never stored.
    """

    input_ids: torch.Tensor  # (N,) long
    positions: torch.Tensor  # (N,) long
    write_rows: torch.Tensor  # rows whose K/V go into a slab
    write_slots: torch.Tensor
    write_pos: torch.Tensor
    decode_groups: list[DecodeGroup]
    prefills: list[tuple[int, int, int, int]]  # (row_start, n_tokens, slot, start_pos)
    logits_rows: torch.Tensor  # rows whose next-token logits are wanted
    prefill_tables: list | None = None  # paged: each prefill's block ids (a tensor; None for padding)


def build_step(segments: list[tuple[int, int, list[int]]], sample: list[bool], device: torch.device,
               tables: dict[int, list[int]] | None = None, block_size: int = 0) -> StepInput:
    """Turn [(slot, start_pos, token_ids)] into a StepInput; sample[i] asks for segment i's last logits.

    tables (the paged layout): each slot's block table; K/V are then written to (block, offset) and read through
    the tables, and write_slots / write_pos hold blocks and offsets."""
    ids: list[int] = []
    pos: list[int] = []
    wr_rows: list[int] = []
    wr_slots: list[int] = []
    wr_pos: list[int] = []
    dec: list[tuple[int, int, int]] = []  # (row, slot, context length)
    prefills: list[tuple[int, int, int, int]] = []
    logit_rows: list[int] = []
    for (slot, start, toks), want in zip(segments, sample):
        row, n = len(ids), len(toks)
        ids.extend(toks)
        pos.extend(range(start, start + n))
        if slot >= 0:
            wr_rows.extend(range(row, row + n))
            if tables is None:
                wr_slots.extend([slot] * n)
                wr_pos.extend(range(start, start + n))
            else:
                table = tables[slot]
                wr_slots.extend(table[p // block_size] for p in range(start, start + n))
                wr_pos.extend(p % block_size for p in range(start, start + n))
        if n == 1 and slot >= 0:
            dec.append((row, slot, start + 1))
        else:
            prefills.append((row, n, slot, start))
        if want:
            logit_rows.append(row + n - 1)

    def t(x: list[int]) -> torch.Tensor:
        return torch.tensor(x, dtype=torch.long, device=device)

    groups = []
    cost = GROUP_CALL_COST_CUDA if torch.device(device).type == "cuda" else None
    if tables is not None:
        return _paged_step(t, ids, pos, wr_rows, wr_slots, wr_pos, dec, prefills, logit_rows, tables, block_size,
                           cost, device)
    for g in group_decodes(sorted(dec, key=lambda d: d[1]), cost):
        lo, hi = g[0][1], g[-1][1] + 1
        lens = [1] * (hi - lo)  # slots in the range that do not decode see one (ignored) key
        for _, slot, ctx in g:
            lens[slot - lo] = ctx
        mask = (torch.arange(max(lens), device=device)[None, :] < t(lens)[:, None])[:, None, None, :]
        groups.append(DecodeGroup(lo, hi, t([r for r, _, _ in g]), t([slot - lo for _, slot, _ in g]), mask))
    return StepInput(t(ids), t(pos), t(wr_rows), t(wr_slots), t(wr_pos), groups, prefills, t(logit_rows))


def _paged_step(t, ids, pos, wr_rows, wr_slots, wr_pos, dec, prefills, logit_rows, tables, block_size, cost,
                device) -> StepInput:
    """build_step's paged half: the same decode groups, each a batch of its decodes' keys gathered through their
    block tables (padded with block 0 and masked), and each prefill's table."""
    groups = []
    for g in group_decodes(sorted(dec, key=lambda d: d[1]), cost):
        ctx = [c for _, _, c in g]
        nb = blocks_for(max(ctx), block_size)
        tab = [tables[slot][:nb] + [0] * (nb - min(nb, len(tables[slot]))) for _, slot, _ in g]
        mask = (torch.arange(nb * block_size, device=device)[None, :] < t(ctx)[:, None])[:, None, None, :]
        groups.append(DecodeGroup(0, len(g), t([r for r, _, _ in g]), t(list(range(len(g)))), mask, t(tab)))
    ptabs = [None if slot < 0 else t(tables[slot][:blocks_for(start + n, block_size)])
             for _, n, slot, start in prefills]
    return StepInput(t(ids), t(pos), t(wr_rows), t(wr_slots), t(wr_pos), groups, prefills, t(logit_rows), ptabs)


class KVCache:
    """One slab per slot: K and V for every layer, reserved at max_len positions (Ch. 7's layout). The paged
    layout's block pool is the same tensor read the other way: num_blocks slabs of block_size positions."""

    def __init__(self, cfg: GPTConfig, num_slots: int, max_len: int, dtype: torch.dtype, device: torch.device):
        shape = (cfg.n_layer, num_slots, cfg.n_head, max_len, cfg.head_dim)
        # zeros, not empty: masked-out keys are multiplied by 0, and 0 * NaN from stale memory would be NaN
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.num_slots, self.max_len = num_slots, max_len
        self.bytes_per_token = kv_bytes_per_token(cfg.n_layer, cfg.n_embd, self.k.element_size())

    @property
    def slab_bytes(self) -> int:
        """Bytes one slot reserves."""
        return self.bytes_per_token * self.max_len


Segments = list[tuple[int, int, list[int]]]  # (slot, start position, token ids); slot -1 is padding


def step_segments(works: list[Work], token_ids: Callable[[int, Work], list[int]] | None = None
                  ) -> tuple[Segments, list[bool]]:
    """The (slot, start, ids) segments of a step's works and which of them sample a next token.

    By default the ids are the requests' own (a prefill's slice of the prompt, a decode's last output token) and
    a prefill samples when it ends its prompt; token_ids(i, w) gives synthetic ids instead (calibration), and
    then every work but a wasted one samples. A padded prefill adds a padding segment: really computed,
    attending only to itself, thrown away.
    """
    segments: Segments = []
    sample: list[bool] = []
    for i, w in enumerate(works):
        if token_ids is not None:
            segments.append((w.slot, w.start, token_ids(i, w)))
            sample.append(w.phase != "wasted")
        elif w.phase == "prefill":
            r = w.request
            segments.append((w.slot, w.start, r.prefill_ids(w.start, w.tokens)))
            sample.append(w.start + w.tokens == r.prefill_len)
        else:
            segments.append((w.slot, w.start, [w.request.output[-1]]))
            sample.append(w.phase == "decode")
        if w.padding:
            segments.append((-1, 0, [EOS] * w.padding))
            sample.append(False)
    return segments, sample


class ModelRunner:
    """A model and its KV slabs (num_slots x max_len positions), or with block_size its block pool (max_len //
    block_size blocks, read through the requests' block tables); executes steps."""

    def __init__(self, model: TinyGPT, num_slots: int, max_len: int, block_size: int | None = None):
        self.model, self.device = model, model.device
        self.block_size = block_size
        rows, positions = (max_len // block_size, block_size) if block_size else (num_slots, max_len)
        self.kv = KVCache(model.config, rows, positions, model.dtype, model.device)
        self._tables: dict[int, list[int]] | None = None  # paged: the step's slot -> block table

    def build(self, segments: Segments, sample: list[bool]) -> StepInput:
        """The step's index tensors."""
        return build_step(segments, sample, self.device, self._tables, self.block_size or 0)

    def forward(self, step: StepInput) -> list[int]:
        """One forward over the step's tokens; the greedy next token of every sampling segment, in order."""
        return self.model.forward_step(step, self.kv).argmax(-1).tolist()

    def execute(self, works: list[Work], token_ids: Callable[[int, Work], list[int]] | None = None) -> list[int]:
        """Run one step of works (step_segments, build, forward): the tokens they sample."""
        if self.block_size:
            self._tables = {w.slot: w.request.block_table for w in works}
        return self.forward(self.build(*step_segments(works, token_ids)))

    @staticmethod
    def warm_up(model: TinyGPT) -> None:
        """An unmeasured step (two prefills, then two decodes) on scratch KV: the first forward in a fresh process
        pays allocations and kernel choices (measured ~100x a warm step), not a step's cost."""
        runner = ModelRunner(model, 2, 16)
        for segments in ([(0, 0, [EOS] * 8), (1, 0, [EOS] * 4)], [(0, 8, [EOS]), (1, 4, [EOS])]):
            runner.forward(runner.build(segments, [True, True]))


@torch.inference_mode()
def generate(model: TinyGPT, prompt: list[int], max_new_tokens: int, stop_at_eos: bool = True,
             eos: int = EOS) -> list[int]:
    """Greedy continuation of one prompt through its own KV slab: the 'running alone' reference path."""
    check_length(len(prompt), max_new_tokens, model.config.n_positions)
    runner = ModelRunner(model, 1, len(prompt) + max_new_tokens)
    out: list[int] = []
    seg = (0, 0, list(prompt))
    for _ in range(max_new_tokens):
        tok = runner.forward(runner.build([seg], [True]))[0]
        out.append(tok)
        if stop_at_eos and tok == eos:
            break
        seg = (0, seg[1] + len(seg[2]), [tok])
    return out
