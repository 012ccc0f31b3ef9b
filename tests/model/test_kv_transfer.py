"""A request's KV copied between two ModelRunners (disaggregated serving: prefill on one, decode on another).

Runner A prefills a real prompt and samples the first token; its KV is exported, A's own copy is then scribbled
over, and runner B (its KV noise, a different slot or different block ids) imports it and decodes the rest. The
tokens must be those of the model running the request alone: B never saw the prompt, so they can only come out
right if every position of the copy landed where B's layout reads it.
"""
from __future__ import annotations

import pytest
import torch
from helpers import DEVICES, HAS_CHECKPOINT, make_random_model

from tinyserve.core.blocks import PagedPool
from tinyserve.core.request import Request, Work
from tinyserve.core.workloads import make_prompt
from tinyserve.model.runner import KVBlob, ModelRunner

pytestmark = [pytest.mark.usefixtures("torch_one_thread"),
              pytest.mark.skipif(not HAS_CHECKPOINT, reason="no shipped checkpoint")]
P, K, BS = 37, 6, 8  # prompt length (not a multiple of the block size: its last block is partly filled), decodes


def prefilled(model, layout: str) -> tuple[ModelRunner, Request]:
    """Runner A, layout slab (slot 1 of 3) or paged (blocks from a PagedPool, as a policy gets them), prefilled."""
    r = Request("r", make_prompt(P, seed=3), K + 1)
    if layout == "slab":
        a = ModelRunner.with_slabs(model, 3, 64)
        r.slot = 1
    else:
        a = ModelRunner.with_blocks(model, 8, BS)
        pool = PagedPool(2, 8, BS, 1)
        r.slot = pool.claim()
        assert pool.allocate(r, P)
    r.output.append(a.execute([Work(r.slot, r, "prefill", 0, P)])[0])
    r.num_prefilled = P
    return a, r


def receiver(model, layout: str, r: Request) -> ModelRunner:
    """Runner B, its KV noise, r moved to a slot / blocks A did not use (blocks out of order, covering P + K)."""
    if layout == "slab":
        b = ModelRunner.with_slabs(model, 3, 64)
        r.slot = 2
    else:
        b = ModelRunner.with_blocks(model, 16, BS)
        r.slot, r.block_table = 1, [15, 12, 9, 14, 8, 11]
    b.kv.k.normal_()
    b.kv.v.normal_()
    return b


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src,dst", [("slab", "slab"), ("slab", "paged"), ("paged", "slab"), ("paged", "paged")])
def test_decoding_on_the_receiver_gives_the_tokens_of_running_alone(get_model, device, src, dst) -> None:
    model = get_model("checkpoint", device)
    a, r = prefilled(model, src)
    old_slot, old_blocks = r.slot, list(r.block_table)
    blob = a.export_kv(r, P)
    a.kv.k.normal_()  # the blob is a copy: what A does with its KV afterwards must not reach B
    a.kv.v.normal_()
    b = receiver(model, dst, r)
    if dst == "slab":  # B's KV is read where it writes: a slot A did not use; a paged B, blocks A did not use
        assert r.slot != old_slot
    else:
        assert not set(old_blocks) & set(r.block_table)
    b.import_kv(r, blob)
    # attention cannot tell keys apart by where they sit (positions are in their values), so the tokens would not
    # catch a copy that permutes positions: a few are read back by hand, as B's layout holds them
    for pos, (block, offset) in ((0, (15, 0)), (8, (12, 0)), (36, (8, 4))):
        got = b.kv.k[:, r.slot, :, pos] if dst == "slab" else b.kv.k[:, block, offset]  # (layers, heads, hd)
        assert torch.equal(got, blob.k[:, :, pos])
    for i in range(K):
        r.output.append(b.execute([Work(r.slot, r, "decode", P + i, 1)])[0])
    assert r.output == model.generate(r.prompt, K + 1, stop_at_eos=False)


def test_the_blob_is_layout_neutral_sized_by_hand_and_keeps_the_dtype(checkpoint_model) -> None:
    blobs = []
    for layout in ("slab", "paged"):
        a, r = prefilled(checkpoint_model, layout)
        blobs.append(a.export_kv(r, P))
    for blob in blobs:  # the checkpoint: 4 layers, 4 heads of 32 (config.json)
        assert blob.k.shape == blob.v.shape == (4, 4, P, 32) and blob.k.dtype == torch.float64
        assert blob.nbytes == P * 2 * 4 * 128 * 8  # K and V, 4 layers x 128 wide, 8 bytes each
    assert torch.equal(blobs[0].k, blobs[1].k) and torch.equal(blobs[0].v, blobs[1].v)  # same prefill, same K/V


def test_a_blob_that_does_not_fit_is_refused(checkpoint_model) -> None:
    a, r = prefilled(checkpoint_model, "slab")
    blob = a.export_kv(r, P)
    other = ModelRunner.with_slabs(make_random_model(n_positions=64, n_layer=2, n_head=2, n_embd=32), 2, 64)
    with pytest.raises(RuntimeError, match="is not"):  # another model's shape
        other.import_kv(r, blob)
    with pytest.raises(RuntimeError, match="is not"):  # the same shape in float32
        a.import_kv(r, KVBlob(blob.k.float(), blob.v.float()))
    paged = ModelRunner.with_blocks(checkpoint_model, 16, BS)
    r.block_table = [1, 2, 3, 4]  # 32 positions, not 37
    with pytest.raises(RuntimeError, match="does not hold"):
        paged.import_kv(r, blob)
    r.slot = -1  # no slot claimed
    with pytest.raises(RuntimeError, match="not here"):
        a.import_kv(r, blob)
