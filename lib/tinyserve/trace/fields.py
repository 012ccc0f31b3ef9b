"""What a run's record holds (Trace's fields): the one list that trace/arrays.py, metrics.py and export.py read
and record.Trace extends with its cached views (works_table, step_arrays, request_arrays, slot_steps, slots_held,
which those modules also call), so none of them imports record.py."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.blocks import PagedRecord
from ..core.kv import SlabRecord
from ..core.request import Request
from .step import StepRecord


@dataclass
class TraceFields:
    """A run's settings, steps and requests, and its layout's own part (kv)."""

    policy: str
    workload: str
    clock: str
    hardware: str | None
    num_slots: int
    knobs: dict
    dry_run: bool
    steps: list[StepRecord] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    # KV accounting: "modeled" = bytes of the hardware preset's model (e.g. a 70B in bf16), "real" = the tiny GPT's
    kv_units: str = "real"
    kv_dtype: str | None = None
    kv_bytes_per_token: int = 0
    kv_capacity_bytes: int | None = None  # the KV budget or modeled KV memory that capped the slots (None: no cap)
    slab_bytes: int = 0  # one slot's slab: slab_tokens x kv_bytes_per_token
    slab_tokens: int = 0  # positions every slot's slab reserves from step 0
    slab_rule: str = ""  # what sized the slab: "max_model_len: ..." (a slab server) or "longest: ..." (a what-if)
    kv_tensor_positions: int | None = None  # positions per slot of the real model's KV tensors (None: dry run)
    workload_knobs: dict = field(default_factory=dict)  # a named workload's knobs, e.g. {"rate": 2.0}
    gpus: int | None = None  # GPUs of the instance, tensor parallel (RunConfig.gpus); None: the preset as it is
    # the layout's own part (its pool's trace_fields): what its JSON, metrics, report and views add
    kv: SlabRecord | PagedRecord = field(default_factory=SlabRecord)

    # ---- the layout's fields, as the lessons read them (Trace.kv holds them) ------------------------------------
    @property
    def kv_layout(self) -> str:
        """"slab", or "paged": a block pool, a block table per sequence (core/blocks.py)."""
        return self.kv.kv_layout

    @property
    def block_size(self) -> int:
        """Positions per block (paged; 0 for slabs)."""
        return self.kv.block_size

    @property
    def num_blocks(self) -> int:
        """Blocks in the pool (paged; 0 for slabs)."""
        return self.kv.num_blocks

    @property
    def block_spans(self) -> list[tuple]:
        """Each time a block was held: (block, request id, index in its table, first step, last step)."""
        return self.kv.block_spans

