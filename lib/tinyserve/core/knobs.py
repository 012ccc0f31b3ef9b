"""A policy's knobs as data: their names and defaults (a policy class names the knobs it takes,
core/scheduling/<name>.py; RunConfig checks a run's knobs by the one rule of each, core/config.py). Below the
policies and RunConfig, so both read it."""
from __future__ import annotations

import math

DEFAULT_BATCH_SIZE = 32
DEFAULT_TIMEOUT_S = 0.1  # dynamic batching's default wait for stragglers
DEFAULT_CHUNK = 512  # the chapter's example chunk length
# decode-first's bound: TGI's router forces waiting requests in after max_waiting_tokens decode steps, default 20
# (text-generation-inference launcher, --max-waiting-tokens)
DEFAULT_MAX_WAITING_STEPS = 20
UNBOUNDED = math.inf  # max_waiting_steps: newcomers wait until no decode is in flight (drain, then refill)
# every policy knob but batch_size (which every policy takes), in the order RunConfig checks them (a policy class's
# `takes` names some of them; core/config.py's RULES has the rule of each)
POLICY_KNOBS = ("timeout", "chunk_size", "max_batch_tokens", "prefill_first", "max_waiting_steps")
