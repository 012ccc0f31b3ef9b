"""A policy's knobs: their defaults and the one rule of each (RunConfig checks a run's knobs with these; a policy
class names the knobs it takes, core/scheduling/<name>.py). Below the policies and RunConfig, so both read it."""
from __future__ import annotations

import math

from ..errors import TinyserveError
from ..lang import t

DEFAULT_BATCH_SIZE = 32
DEFAULT_TIMEOUT_S = 0.1  # dynamic batching's default wait for stragglers
DEFAULT_CHUNK = 512  # the chapter's example chunk length
# decode-first's bound: TGI's router forces waiting requests in after max_waiting_tokens decode steps, default 20
# (text-generation-inference launcher, --max-waiting-tokens)
DEFAULT_MAX_WAITING_STEPS = 20
UNBOUNDED = math.inf  # max_waiting_steps: newcomers wait until no decode is in flight (drain, then refill)


def check_int(name: str, value, lo: int) -> int:
    """An integer >= lo (a whole float such as 2.0 becomes 2), or the one message naming the knob."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TinyserveError(t("engine.knob.integer", name=name, lo=lo, value=value))
    if value < lo:
        raise TinyserveError(t("engine.knob.at_least", name=name, lo=lo, value=value))
    return value


def _positive(name: str, value) -> int:
    return check_int(name, value, 1)


def _timeout(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise TinyserveError(t("engine.knob.timeout", value=value))
    return float(value)


def _flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TinyserveError(t("engine.knob.prefill_first", value=value))
    return value


def _waiting(name: str, value) -> int | float:
    if value == UNBOUNDED:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            float(value).is_integer() and value >= 0):
        raise waiting_steps_error(value)
    return int(value)


# every policy knob and its rule, batch_size first (every policy takes it); the others in the order RunConfig
# checks them (a policy class's `takes` names some of them)
RULES = {"batch_size": _positive, "timeout": _timeout, "chunk_size": _positive, "max_batch_tokens": _positive,
         "prefill_first": _flag, "max_waiting_steps": _waiting}
POLICY_KNOBS = tuple(RULES)[1:]


def check_knob(name: str, value):
    """The one rule of each policy knob: the value as the policy stores it, or a TinyserveError naming the knob."""
    if name not in RULES:
        raise TinyserveError(f"{name}: not a policy knob")  # words: ok (a bug, not user input)
    return RULES[name](name, value)


def waiting_steps_error(value) -> TinyserveError:
    """The one message for a bad max_waiting_steps."""
    return TinyserveError(t("engine.knob.max_waiting_steps", value=value))


def waiting_steps(prefill_first: bool | None, max_waiting_steps: float | None) -> float:
    """One bound from the two ways of saying it (prefill_first is the older, coarser knob)."""
    if max_waiting_steps is None:
        return DEFAULT_MAX_WAITING_STEPS if prefill_first is False else 0
    if prefill_first is not None and prefill_first != (max_waiting_steps == 0):
        raise TinyserveError(t("engine.knob.waiting_contradicts", value=max_waiting_steps, prefill_first=prefill_first))
    return max_waiting_steps


def check_token_budget(batch_size: int, max_batch_tokens: int) -> None:
    """Chunked prefill's budget must leave room for every slot's decode."""
    if max_batch_tokens < batch_size:
        raise TinyserveError(t("engine.knob.token_budget", batch_size=batch_size, max_batch_tokens=max_batch_tokens))
