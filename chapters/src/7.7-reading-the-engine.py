# %% [markdown]
# # 7.7 Reading the engine
#
# **What you will see**: the code that made every number in 7.0–7.6, shown from the running package itself, so
# it cannot drift from what ran. One step of the engine follows the chapter's picture of a serving loop:
#
# ```
# arrivals -> schedule -> execute -> clock -> update -> record
#    |          |           |          |         |         |
#  queue     policy's     one       modeled    stop rule,  the trace
#            plan         forward   or wall    slots, KV
# ```
#
# At the end you write a policy of your own in a few lines and run it.

# %%
import inspect
from collections import deque

from IPython.display import Markdown, display

import tinyserve
tinyserve.set_language("en")
from tinyserve.analysis.paged_cost import decode_ratios, load_paged_cost
from tinyserve.core.blocks import PagedPool
from tinyserve.core.scheduling import ChunkedPrefill, ContinuousBatching, Scheduler
from tinyserve.engine import Engine
from tinyserve.lang import ljust, say, t
from tinyserve.lang.glue import glue
from tinyserve.loop import Run
from tinyserve.model.gpt import PagedKV
from tinyserve.model.runner import ModelRunner


def show(*functions) -> None:
    """The source of each function, as the package has it now, highlighted."""
    for f in functions:
        display(Markdown(f"`{inspect.getsourcefile(f).split('lib/')[-1]}`\n\n```python\n{inspect.getsource(f)}```"))

# %% [markdown]
# ## 1. One step
#
# `Run.step` is the picture in code: it takes no arguments, and each line calls one part, which lives in its own
# file. Chapter 12's deployments (prefill and decode on separate GPUs) drive plain runs from outside, through
# `port.py`: nothing in a step knows it is part of one.

# %%
show(Run.step)

# %% [markdown]
# ## 2. Schedule: a policy plans, the scheduler owns the rest
#
# A policy only answers one question per step: which slot computes what. Chunked prefill's answer: every
# decode first, then pieces of prompts until the step's token budget is spent.

# %%
show(ChunkedPrefill.plan)

# %% [markdown]
# The scheduler applies what the step produced. It is the only place a request changes state: admitted, resumed,
# preempted, finished by the stop rule, aborted or rejected, then freed from its slot and its KV. A test records
# who calls each of those and fails if anything but the Scheduler does.

# %%
show(Scheduler.update)

# %% [markdown]
# ## 3. KV: a pool, in slabs or in pages
#
# The scheduler asks the pool for room and gives it back; it never asks which layout it has, and neither does
# the model: each layout also builds the indexes its K/V are written and read through (`model/gpt.py`, beside the
# model: a slot and a position for slabs; `slot_mapping` and `block_tables` for pages, as vLLM names them). The
# paged pool hands out fixed-size blocks to each sequence's block table, lowest free block first.

# %%
show(PagedPool.allocate, PagedPool.free)

# %% [markdown]
# Attention wants each sequence's keys side by side, and a sequence's blocks lie anywhere in the pool. So the
# paged layout copies a call's blocks into one buffer, kept for the whole run, a few sequences at a time, so that
# the copy is still in the CPU's cache when attention reads it (`PagedKV.gather`). Measured side by side
# (`benchmarks/paged.py`), that makes a paged decode step cost up to {glue}`paged_step_max` times a slab step; a
# fresh tensor for every copy cost up to {glue}`paged_step_before` times.

# %%
# what the paragraph above says: the committed benchmark table's paged over slab decode steps, now and before
paged_steps = load_paged_cost()
glue("paged_step_max", decode_ratios(paged_steps)["max"], "{:.1f}")
glue("paged_step_before", decode_ratios(paged_steps["before"])["max"], "{:.0f}")
show(PagedKV.gather)

# %% [markdown]
# ## 4. Execute: one forward over every token of the step
#
# The runner turns the plan into one batch (prefill chunks and decodes side by side), runs the tiny GPT once
# and samples a token for each sequence that asked for one. First it asks the thread governor, which lives in the
# same file: all of the CPU's threads while the cores are free, one while another program competes for them.

# %%
show(ModelRunner.execute)

# %% [markdown]
# ## Where each idea lives
#
# | idea in the chapter | file in `lib/tinyserve/` |
# |---|---|
# | static batching, padding, the fastest finisher | `core/scheduling/static.py` |
# | dynamic batching (a timeout) | `core/scheduling/dynamic.py` |
# | continuous batching, prefill-first or decode-first | `core/scheduling/continuous.py` |
# | chunked prefill, the token budget | `core/scheduling/chunked.py` |
# | what every policy shares; a request's lifecycle, the stop rule | `core/scheduling/scheduler.py`, `core/request.py` |
# | slabs; pages and preemption | `core/kv.py`; `core/blocks.py` |
# | the step loop | `loop.py` |
# | the roofline, modeled time | `cost/pricing.py`, `cost/clock.py` |
# | the tiny GPT and its weights, one forward per step | `model/gpt.py`, `model/runner.py` |
# | where a step's K/V go and come from, per layout | `model/gpt.py` |
# | a policy's name and knobs, declared once | its own file; `core/scheduling/registry.py` |
# | prefill and decode on separate GPUs | `deploy/coordinator.py`; the hand-over: `deploy/handover.py`, `port.py` |
#
# ## 5. Your turn: shortest prompt first
#
# Continuous batching admits the queue in arrival order. A server could instead admit the shortest prompt
# first, so short chats do not wait behind long documents. Here it is, as a policy: sort the queue, then let
# continuous batching do the rest.

# %%
class ShortestPromptFirst(ContinuousBatching):
    """Continuous batching that admits the waiting request with the shortest prompt first."""

    name = "shortest-prompt-first"

    def plan(self, now, more_coming):
        self.waiting = deque(sorted(self.waiting, key=lambda r: r.prompt_len))
        return super().plan(now, more_coming)

# %% [markdown]
# Run both on the long-tail traffic (a dry run on the modeled clock, 32 slots) and compare the time to first
# token.

# %%
# NBVAL_CHECK_OUTPUT
dry = Engine()
runs = {"fifo": dry.run("chapter-7.2-longtail", "continuous", batch_size=32, dry_run=True, progress=False),
        "spf": dry.run("chapter-7.2-longtail", ShortestPromptFirst(32), dry_run=True, progress=False)}
say("7.7.head")
for key, tr in runs.items():
    ttft = tr.metrics()["ttft_ms"]
    say("7.7.row", policy=ljust(t(f"7.7.name.{key}"), 26), p50=ttft["p50"] / 1e3, p99=ttft["p99"] / 1e3, mean=ttft["mean"] / 1e3)
    for q in ("p50", "p99"):
        glue(f"{key}_{q}", ttft[q] / 1e3, "{:.2f}")

# %% [markdown]
# Shortest first cuts the median wait ({glue}`fifo_p50` s to {glue}`spf_p50` s), but a long prompt now waits behind
# every shorter one that keeps arriving: the p99 grows from {glue}`fifo_p99` s to {glue}`spf_p99` s. That is why
# servers keep first come, first served, or bound how long anyone may be passed over.
#
# Change the sort key to something else a server knows when a request arrives (the longest prompt first? the
# earliest arrival, which is FIFO again?) and run the two cells again. The output's length is no key: nobody
# knows it until the answer ends. Every policy you write this way runs on the real model too: drop
# `dry_run=True`.
#
# ## What to remember
#
# * One step: arrivals, schedule, execute, clock, update, record; `Run.step` says it in that order.
# * A policy decides who computes what; the scheduler owns every request's lifecycle; the pool owns the KV.
# * Each of the chapter's policies is one short file in `core/scheduling/`.
