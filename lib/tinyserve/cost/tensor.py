"""Tensor parallelism inside one instance: the model split over N GPUs of one node, priced by the modeled clock.

`tensor_parallel(hw, n)` is the one place an instance of n GPUs is made: a copy of the preset whose step is priced
by the same formula (pricing.price) with these changes, a modeled simplification (stated; of its numbers only the
all-reduce's latency is measured):

  rates        each GPU holds 1/n of the weights and of every token's K/V and does 1/n of the flops, all n at
               once: bandwidth_Bps, kv_bandwidth_Bps (if stated), peak_flops and attn_flops (if stated) x n; the
               per-step and per-call overheads stay (every GPU pays them, in parallel)
  KV memory    each GPU keeps what it kept for weights and KV alone (kv_memory_bytes + W, W the resident weights:
               resident_weight_bytes, else weight_bytes) and now holds W / n of the weights, so the instance's
               KV memory is n x (kv_memory_bytes + W) - W (its activations and workspace stay per GPU)
  all-reduces  Megatron-style: two per layer (after attention, after the MLP), each of the step's activations,
               tokens x d_model x 2 bytes (bf16), over the preset's tp_link, not overlapped with anything:
                   one all-reduce = allreduce_latency_s + 2(n-1)/n x bytes / link bandwidth
               allreduce_latency_s is the preset's measured time of one all-reduce of a decode-sized message
               (h200-70b-fp8: 9.3 us, vLLM's custom all-reduce on 8 H100s over NVLink/NVSwitch, its sources say
               where), one constant whatever n: a one-shot all-reduce over NVSwitch reads every peer at once, so
               its time barely moves with n (8.8, 8.5, 9.3 us measured on 2, 4, 8 GPUs), where a ring pays a link
               latency at each of its 2(n-1) steps. The bytes go at a ring's (or two-shot's) bandwidth-optimal
               2(n-1)/n x bytes / bandwidth, so a large message (a prefill's) stays bandwidth-bound. tokens: every
               token the step pushes through the linear layers (padding and wasted decodes included, as
               ModeledClock.terms' "tokens"). So per step: allreduce_token_s x tokens + allreduce_step_s, with
               allreduce_token_s = 2 x n_layer x 2(n-1)/n x d_model x 2 / bandwidth and
               allreduce_step_s = 2 x n_layer x allreduce_latency_s.
               Mid-size messages are priced low: the same measurement gives 24.1 us at 8 GPUs for 1 MB (64 decode
               tokens) where this says 13.4 us; the latency, not the bytes, is what decides whether more GPUs
               make a decode step faster, and with it a decode step on 8 GPUs is faster than on 4.
  num_gpus     n: a deployment's goodput is per GPU

n == 1 returns hw itself, so a run without --gpus (or with --gpus 1) is priced exactly as before. The copy keeps
the preset's name (its texts and translations are keyed by it); the run's trace says n (Trace.gpus, "gpus" in the
JSON). A preset whose file already folds tensor parallelism into its rates (num_gpus > 1, e.g. 4xh100-70b-bf16)
refuses --gpus altogether, as does one with no tp_link or one GPU per node (cpu-tiny).
"""
from __future__ import annotations

from dataclasses import replace

from ..core.config import check_gpus
from ..errors import TinyserveError
from ..lang import t
from .links import get_link
from .presets import HardwarePreset

ACTIVATION_BYTES = 2  # bf16 activations, the all-reduces' element
ALLREDUCES_PER_LAYER = 2  # after attention's output projection and after the MLP (Megatron-LM's split)


def tensor_parallel(hw: HardwarePreset, n: int) -> HardwarePreset:
    """hw as one instance of n GPUs of its node, tensor parallel (module docstring); n == 1: hw itself.

    Refuses (one line, in the learner's language) n that is not an integer >= 1, a preset that already folds
    tensor parallelism in (num_gpus > 1), and n > 1 on a preset with no tp_link or one GPU per node, beyond its
    gpus_per_node or beyond its n_kv_heads."""
    n = check_gpus(n)
    if hw.num_gpus > 1:
        raise TinyserveError(t("engine.knob.gpus_folded", preset=hw.name, num_gpus=hw.num_gpus))
    if n == 1:
        return hw
    if hw.tp_link is None or hw.gpus_per_node == 1:
        raise TinyserveError(t("engine.knob.gpus_one", preset=hw.name, value=n))
    if n > hw.gpus_per_node:
        raise TinyserveError(t("engine.knob.gpus_node", preset=hw.name, limit=hw.gpus_per_node, value=n))
    if n > hw.n_kv_heads:
        raise TinyserveError(t("engine.knob.gpus_heads", preset=hw.name, limit=hw.n_kv_heads, value=n))
    if hw.n_kv_heads % n:  # each GPU holds a whole share of the KV heads (vLLM refuses an uneven split too)
        raise TinyserveError(t("engine.knob.gpus_divide", preset=hw.name, heads=hw.n_kv_heads, value=n,
                               choices=", ".join(str(k) for k in range(1, hw.n_kv_heads + 1)
                                                 if hw.n_kv_heads % k == 0 and k <= hw.gpus_per_node)))
    link = get_link(hw.tp_link)
    weights = hw.resident_weight_bytes or hw.weight_bytes  # resident: what each GPU holds 1/n of
    moved = 2 * (n - 1) / n  # bytes each GPU sends per byte reduced: reduce-scatter, then all-gather (ring, two-shot)
    per_layer = ALLREDUCES_PER_LAYER * hw.n_layer
    return replace(
        hw, num_gpus=n,
        bandwidth_Bps=n * hw.bandwidth_Bps, peak_flops=n * hw.peak_flops,
        kv_bandwidth_Bps=n * hw.kv_bandwidth_Bps, attn_flops=n * hw.attn_flops,  # 0 (= the rate above) stays 0
        kv_memory_bytes=None if hw.kv_memory_bytes is None else n * (hw.kv_memory_bytes + weights) - weights,
        allreduce_token_s=per_layer * moved * hw.d_model * ACTIVATION_BYTES / link.bandwidth_Bps,
        allreduce_step_s=per_layer * hw.allreduce_latency_s)
