"""What notebooks 7.0, 7.3, 7.5 and 7.6 compute about steps, chunks and gaps: once, here, torch-free.

The roofline of a step's linear layers (clock.py prices them so): every step streams the weights once
(weight bytes / bandwidth) and multiplies each of its tokens through every parameter (2 flops each, at the
preset's arithmetic rate); the layers take the longer of the two. The *ridge* is the token count where the two
are equal: below it, extra tokens (more decodes, a prefill chunk) ride in the shadow of the weight stream;
past it, each extra token adds its own arithmetic time to the step, and everyone in the step waits for it.
"""
from __future__ import annotations

from collections.abc import Iterable

from ..cost.clock import ModeledClock
from ..cost.flops import linear_flops
from ..cost.presets import HardwarePreset
from ..core.request import Work, decode_works
from ..trace.record import Trace
from ..trace.step import StepRecord


# ------------------------------------------------------------------------------------------------ steps
def mixed_works(decodes: int, context: int, chunk: int, chunk_start: int = 0) -> list[Work]:
    """One step: `decodes` decodes at `context` keys each, beside one prefill chunk of `chunk` tokens from `chunk_start`."""
    return decode_works([context] * decodes) + [Work(decodes, None, "prefill", chunk_start, chunk)]


# ------------------------------------------------------------------------------------------------ roofline
def weight_stream_s(hw: HardwarePreset) -> float:
    """Seconds every step spends streaming the weights from memory: weight bytes / bandwidth."""
    return hw.weight_bytes / hw.bandwidth_Bps


def compute_s_per_token(hw: HardwarePreset) -> float:
    """Seconds of linear-layer arithmetic one token adds to a step: 2 flops x parameters / arithmetic rate."""
    return linear_flops(hw, 1) / hw.peak_flops


def linear_compute_s(hw: HardwarePreset, tokens: int) -> float:
    """Seconds of linear-layer arithmetic for a step of `tokens` tokens (padding and wasted tokens count too)."""
    return tokens * compute_s_per_token(hw)


def ridge_tokens(hw: HardwarePreset) -> float:
    """Tokens per step at which the linear layers' arithmetic takes exactly as long as streaming the weights."""
    return weight_stream_s(hw) / compute_s_per_token(hw)


def ridge_intensity(hw: HardwarePreset) -> float:
    """The ridge as arithmetic intensity: flops per byte streamed at which bandwidth and arithmetic tie."""
    return hw.peak_flops / hw.bandwidth_Bps


def intensity(hw: HardwarePreset, tokens: int) -> float:
    """Flops per weight byte streamed of a step's linear layers with `tokens` tokens."""
    return linear_flops(hw, tokens) / hw.weight_bytes


def linear_s(clock: ModeledClock, tokens: int) -> float:
    """The modeled clock's time for the linear layers of a step of `tokens` tokens (the roofline: the longer part)."""
    return clock.cost([Work(0, None, "prefill", 0, tokens)])["linear_s"]


def achieved_flops(clock: ModeledClock, tokens: int) -> float:
    """Useful flop/s the linear layers reach in a step of `tokens` tokens on the modeled clock."""
    return linear_flops(clock.hardware, tokens) / linear_s(clock, tokens)


# ------------------------------------------------------------------------------------------------ from traces
def _requests(trace: Trace, ids: str | Iterable[str] | None) -> list:
    if ids is None:
        return list(trace.requests)
    return [trace.request(i) for i in ([ids] if isinstance(ids, str) else ids)]


def worst_gap_ms(trace: Trace, ids: str | Iterable[str] | None = None) -> float:
    """Longest wait (ms) between two consecutive tokens of the named request(s), or of all; 0.0 if none has two."""
    return 1e3 * max((b - a for r in _requests(trace, ids) for a, b in zip(r.token_times, r.token_times[1:])),
                     default=0.0)


def ttft_ms(trace: Trace, request_id: str) -> float | None:
    """A request's time to first token (ms) as the contract's JSON reports it; None if it got none."""
    return trace.request_dict(trace.request(request_id))["ttft_ms"]


def e2el_ms(trace: Trace, request_id: str) -> float | None:
    """A request's end-to-end latency (ms) as the contract's JSON reports it; None if it did not finish."""
    return trace.request_dict(trace.request(request_id))["e2el_ms"]


def worst_gap_step(trace: Trace, ids: str | Iterable[str] | None = None) -> StepRecord | None:
    """The step whose end gave the named request(s) (or any) the token after their longest wait; None if no gap."""
    gaps = [(b - a, b) for r in _requests(trace, ids) for a, b in zip(r.token_times, r.token_times[1:])]
    if not gaps:
        return None
    end = max(gaps)[1]  # a token is produced at the end of the step that computed it
    return min(trace.steps, key=lambda s: abs(s.start_s + s.duration_s - end))
