"""Decode attention is split into groups of neighbouring slots; the split must never change a logit."""
from __future__ import annotations

import pytest
import torch

from tinyserve.core import kv as M  # where the decode grouping and its call cost live
from tinyserve.core.config import GPTConfig
from tinyserve.core.kv import group_decodes
from tinyserve.model.gpt import SlabKV, TinyGPT, build_step


def test_a_long_context_among_short_ones_gets_its_own_group():
    dec = [(i, i, 2000 if i == 5 else 10) for i in range(12)]
    groups = group_decodes(dec)
    assert [[d[1] for d in g] for g in groups] == [[0, 1, 2, 3, 4], [5], [6, 7, 8, 9, 10, 11]]
    # equal contexts stay in one call
    assert len(group_decodes([(i, i, 300) for i in range(32)])) == 1
    # every decode lands in exactly one group, in slot order
    assert [d for g in groups for d in g] == dec


@pytest.mark.parametrize("call_cost", [0, 256, 10**9])
def test_grouping_never_changes_the_logits(monkeypatch, call_cost):
    torch.manual_seed(0)
    m = TinyGPT(GPTConfig(n_positions=128, n_layer=2, n_head=2, n_embd=32)).double().eval()
    ctx = [3, 90, 4, 5, 60, 2, 7]  # slot i holds a prompt of ctx[i] tokens
    prompts = [torch.randint(0, 256, (n,)).tolist() for n in ctx]
    kv = SlabKV(m.config, len(ctx), 128, torch.float64, torch.device("cpu"))
    m.forward_step(build_step([(i, 0, p) for i, p in enumerate(prompts)], [False] * len(ctx), torch.device("cpu")), kv)
    monkeypatch.setattr(M, "GROUP_CALL_COST", call_cost)
    step = build_step([(i, n, [65]) for i, n in enumerate(ctx)], [True] * len(ctx), torch.device("cpu"))
    if call_cost == 0:
        assert len(step.decode_groups) > 2
    if call_cost == 10**9:
        assert len(step.decode_groups) == 1
    got = m.forward_step(step, kv)
    with torch.no_grad():
        for i, p in enumerate(prompts):
            want = m(torch.tensor([p + [65]]))[0, -1]
            assert torch.allclose(got[i], want, atol=1e-9, rtol=0)
