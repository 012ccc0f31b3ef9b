"""The one place the engine's steps are executed: the KV tensors, the step's segments, one forward, greedy sampling.

The engine, the calibration, the validation and the benchmark all run steps through a ModelRunner (nano-vllm's
model_runner): works -> segments -> StepInput (index tensors, step.py) -> TinyGPT.forward_step -> argmax.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..core.request import Work
from ..core.tokenizer import EOS
from .step import DecodeGroup, KVCache, StepInput, build_step  # noqa: F401  DecodeGroup: an old name of this module

if TYPE_CHECKING:
    from .gpt import TinyGPT


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
        self.kv = KVCache(model.config, rows, positions, model.dtype, model.device, paged=bool(block_size))
        self._tables: dict[int, list[int]] | None = None  # paged: the step's slot -> block table

    def build(self, segments: Segments, sample: list[bool], tables: dict[int, list[int]] | None = None) -> StepInput:
        """The step's index tensors; paged, through `tables` (slot -> block ids) or those of the works executed."""
        return build_step(segments, sample, self.device, tables or self._tables, self.block_size or 0,
                          self.model.dtype)

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


def generate(model: TinyGPT, prompt: list[int], max_new_tokens: int, stop_at_eos: bool = True,
             eos: int = EOS) -> list[int]:
    """Greedy continuation of one prompt running alone: TinyGPT.generate, under its old name here."""
    return model.generate(prompt, max_new_tokens, stop_at_eos, eos)
