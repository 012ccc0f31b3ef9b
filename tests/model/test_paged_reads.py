"""How the paged layout reads its blocks (issue 51): gathered a few sequences at a time into one reused buffer. What
is pinned is what does not depend on the machine: the bits each read gives (the same as one whole gather), the blocks
each step reads, and that no warm step allocates a gather buffer.
The speed itself is a benchmark (benchmarks/paged.py), not a test.
"""
from __future__ import annotations

import pytest
import torch
from helpers import DEVICES, DTYPES

from tinyserve.core.request import decode_works
from tinyserve.engine import Engine
from tinyserve.model.gpt import PagedKV, build_paged_step
from tinyserve.model.runner import ModelRunner, step_segments
from tinyserve.tools.calibrate import block_tables

pytestmark = pytest.mark.usefixtures("torch_one_thread")
DTYPE_IDS = [str(d).removeprefix("torch.") for d in DTYPES]


def noisy_pool(model, num_blocks: int, block_size: int, positions: int | None = None) -> PagedKV:
    """A PagedKV full of random keys and values (zeros would hide a row read from the wrong blocks)."""
    kv = PagedKV(model.config, num_blocks, block_size, model.dtype, model.device)
    g = torch.Generator(device=model.device).manual_seed(5)
    for c in (kv.k, kv.v):
        c.copy_(torch.randn(c.shape, generator=g, dtype=c.dtype, device=c.device))
    if positions is not None:
        kv.gather_positions = positions
    return kv


def logits(model, kv: PagedKV, works, tables: dict[int, list[int]], block_size: int) -> torch.Tensor:
    """One decode step of works through tables."""
    segs, sample = step_segments(works, lambda i, w: [(7 * i + j) % 256 for j in range(w.tokens)])
    return model.forward_step(build_paged_step(segs, sample, model.device, tables, block_size), kv)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("device", DEVICES)
def test_a_group_read_a_few_sequences_at_a_time_gives_the_bits_of_one_whole_read(get_model, device, dtype):
    """Attention is per sequence, so batching its rows differently must not move a single bit."""
    model = get_model("random", device, dtype)
    works = decode_works([40, 70, 33, 64, 90, 17, 80])  # one group: neighbouring slots, contexts close enough
    tables = block_tables(works, 8)
    n = sum(len(t) for t in tables.values())
    whole = noisy_pool(model, n, 8, positions=10**6)  # every row in one read
    one = noisy_pool(model, n, 8, positions=96)  # a row at a time (the group reads 96 keys a row)
    some = noisy_pool(model, n, 8, positions=200)  # two rows at a time
    want = logits(model, whole, works, tables, 8)
    assert torch.equal(logits(model, one, works, tables, 8), want)
    assert torch.equal(logits(model, some, works, tables, 8), want)


def test_each_step_reads_exactly_its_tables_blocks_and_no_warm_step_allocates(checkpoint_model, monkeypatch):
    """A real paged run under continuous batching: at every layer of every step, the blocks gathered are the decode
    groups' tables, row after row, then the prefills' tables; each read is planned once a step (its ids and views),
    not once a layer; the gather buffer is allocated once, at the first read, and every later read is a view of it."""
    reads: list[list[int]] = []
    plans: list[int] = []  # reads planned in each step
    made_reads: list[int] = []  # reads made (gathered) in each step
    buffers: set[int] = set()
    real_gather, real_plan = PagedKV.gather, PagedKV.plan

    def plan(self, *args):
        plans[-1] += 1
        return real_plan(self, *args)

    def gather(kc, vc, r):
        reads[-1].extend(r.ids.tolist())
        made_reads[-1] += 1
        k, v = real_gather(kc, vc, r)
        buffers.update({k.untyped_storage().data_ptr(), v.untyped_storage().data_ptr()})
        return k, v

    def want_of(s) -> list[int]:
        return ([b for g in s.decode_groups for b in g.tables.reshape(-1).tolist()]
                + [b for t in s.prefill_tables if t is not None for b in t.tolist()])

    real_build = PagedKV.build
    wanted: list[list[int]] = []

    def build(self, *args):
        s = real_build(self, *args)
        wanted.append(want_of(s))
        return s

    def forward(self, step):
        reads.append([])
        plans.append(0), made_reads.append(0)
        return real_forward(self, step)

    real_forward = ModelRunner.forward
    monkeypatch.setattr(PagedKV, "gather", staticmethod(gather))
    monkeypatch.setattr(PagedKV, "build", build)
    monkeypatch.setattr(PagedKV, "plan", plan)
    monkeypatch.setattr(ModelRunner, "forward", forward)
    run = Engine(checkpoint_model).start("chapter-7.2-longtail", "continuous", clock="wall", kv_layout="paged",
                                         workload_knobs={"n": 8})
    reads.clear(), wanted.clear(), plans.clear(), made_reads.clear()  # the warm-up step runs on slabs of its own
    while not run.done:
        run.step()
    assert len(reads) == len(wanted) == len(plans) > 10
    for got, want in zip(reads, wanted):  # every layer reads the same blocks, in the same order
        assert got == want * checkpoint_model.config.n_layer
    for made, planned in zip(made_reads, plans):  # planned at the first layer, made at every layer
        assert made == planned * checkpoint_model.config.n_layer > 0
    assert run.runner.kv.gather_allocations == 1
    assert len(buffers) == 2  # K's and V's: every gathered view lives in one of the two
