"""Batching policies, one file each, named as the chapter names them; each, asked every step, returns a plan:
which slot computes what. scheduler.py has what they share (Plan, Policy) and the owner of a request's lifecycle.

static      gather B requests, prefill them padded to the longest prompt, decode until the last one finishes
dynamic     static, but the batch also launches when a timeout since its first waiting request expires
continuous  iteration-level: a finished request leaves its slot the step it finishes; the next one enters
            (prefill-first, or decode-first for at most max_waiting_steps decode steps, as TGI's router)
chunked     continuous, with a per-step token budget: decodes first, then prefill chunks fill what is left
variants    other systems' rules, for the gallery: separate-prefill, whole-prompt, chunk-only
"""
from __future__ import annotations

from ..config import RunConfig
from .scheduler import Plan, Policy, Scheduler, decode_work
from .chunked import ChunkedPrefill
from .continuous import ContinuousBatching
from .dynamic import DynamicBatching
from .static import StaticBatching

__all__ = ["Plan", "Policy", "decode_work", "Scheduler", "StaticBatching", "DynamicBatching", "ContinuousBatching",
           "ChunkedPrefill", "make_policy"]


def make_policy(name: str, **knobs) -> Policy:
    """Build a policy by name; its knobs are RunConfig's policy knobs, checked there (one that does not apply to
    the policy is an error)."""
    return RunConfig(name, **knobs).build_policy()
