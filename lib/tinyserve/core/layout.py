"""A run's KV, laid out once before its first step: which requests can ever fit, the pool that holds their K/V
(one slab per slot, or blocks of the paged layout) and how many positions the real model's tensors need."""
from __future__ import annotations

from dataclasses import dataclass

from .blocks import blocks_for, paged_pool, refusals_paged
from .config import DTYPE_BYTES, GPTConfig, RunConfig
from .kv import SlabPlan, SlotPool, num_slots_for, plan_slabs
from .request import REJECTED, Request


@dataclass
class RunKV:
    """What layout_kv decides."""

    plan: SlabPlan  # bytes per token, capacity and slab rule (the paged pool is sized from the same plan)
    pool: SlotPool  # a SlotPool, or a blocks.PagedPool
    accepted: list[Request]  # the requests that can ever fit, in order
    refused: list[tuple]  # (request, why) for those whose KV can never fit: the scheduler rejects them
    tensor_positions: int  # slabs: positions per slot; paged: positions of the block pool (blocks x block_size)


def layout_kv(hw, cfg: GPTConfig, requests: list[Request], batch_size: int, dtype, config: RunConfig) -> RunKV:
    """The run's KV, of the layout config names (the one place that reads it): hw is the modeled clock's preset
    (None under the wall clock), dtype the model's (a torch dtype or, on dry runs, its name)."""
    kv_budget, max_model_len, block_size = config.kv_budget, config.max_model_len, config.block_size
    size = DTYPE_BYTES[dtype] if isinstance(dtype, str) else dtype.itemsize
    plan = plan_slabs(hw, cfg.n_layer, cfg.n_embd, size, str(dtype).removeprefix("torch."), cfg.n_positions,
                      kv_budget, max_model_len, config.slab)
    bpt = plan.bytes_per_token
    if config.kv_layout == "paged":  # sized as slabs would be (equal memory): the longest request, as a slab run's
        longest = max((r.prompt_len + r.max_new_tokens for r in requests if r.status != REJECTED), default=1)
        pool = paged_pool(batch_size, plan.capacity, plan.slab_tokens(longest) * bpt, block_size, bpt)
        refused = refusals_paged(pool, requests, plan.capacity_name)
        accepted = _others(requests, refused)
        # lowest-first allocation keeps block ids below the most ever held at once, at most every slot's longest
        # sequence, so the tensors need no more blocks than that, however large the modeled pool
        most = max((r.prompt_len + r.max_new_tokens for r in accepted), default=1)
        tensor = block_size * min(pool.num_blocks, pool.num_slots * blocks_for(most, block_size))
    else:
        refused = plan.refusals(requests)
        accepted = _others(requests, refused)
        longest = max((r.prompt_len + r.max_new_tokens for r in accepted), default=1)
        slab_tokens = plan.slab_tokens(longest)
        pool = SlotPool(num_slots_for(batch_size, plan.capacity, slab_tokens * bpt), slab_tokens, bpt)
        # the real model's slabs: max_model_len if given, else the run's longest (a 4,096-position float64 slab
        # per slot would not fit Binder's memory); the modeled bytes are accounted apart (the trace says which)
        tensor = max_model_len or longest
    return RunKV(plan, pool, accepted, refused, tensor)


def _others(requests: list[Request], refused: list[tuple]) -> list[Request]:
    """The requests neither rejected already nor refused, in order."""
    out = {id(r) for r, _ in refused}
    return [r for r in requests if r.status != REJECTED and id(r) not in out]
