# %% [markdown]
# # 7.4 The bill for Chapter 8: KV memory
#
# **What you will see.** Continuous batching lets sequences enter and leave every step. What then limits how
# many run at once is memory for their **KV cache**: the key and value vectors every token leaves in every
# layer, kept so later tokens can attend to it without recomputing. You will see how a simple server lays that
# memory out — one fixed *slab* per slot — how little of it holds tokens, how many sequences a 70B model on one
# H200 can serve that way and how many it could, and what Chapter 8's paging changes.
#
# KV bytes here are those of the modeled 70B-class model (bf16 K and V, 8 KV heads × 128 dimensions × 80
# layers) in the memory an H200 has left after the weights.

# %%
import numpy as np
import matplotlib.pyplot as plt

import tinyserve
import tinyserve_widgets as tw
from tinyserve.analysis import batching as ab
from tinyserve.cache import sequences_that_fit
from tinyserve.clock import get_preset
from tinyserve.engine import Engine
from tinyserve.lang import say, t
from tinyserve.workloads import get_workload
from tinyserve_widgets.palette import PALETTE
from tinyserve_widgets.predict import Predict
from tinyserve_widgets.static import plot_slabs_and_pages

tinyserve.set_language("en")
dry = Engine()
hw = get_preset("h200-70b-fp8")
print(hw.text("description"))
say("7.4.kv_left", gb=hw.kv_memory_bytes / 1e9, n=hw.max_model_len)

# %% [markdown]
# ## 1. A sequence's KV grows with it
#
# A sequence holding *n* tokens needs *n* × (bytes per position). The run below tells us this model's bytes:

# %%
traffic = get_workload("chapter-7.2-longtail")
trace = dry.run(traffic, "continuous", batch_size=32, dry_run=True, progress=False)
per_position = ab.kv_bytes_per_position(trace)

# %%
# NBVAL_CHECK_OUTPUT
say("7.4.per_position", n=per_position, units=t(f"7.4.units.{trace.kv_units}"), dtype=trace.kv_dtype)
for n in (100, 1000, 4096):
    say("7.4.context_kv", n=n, gb=n * per_position / 1e9)

# %% [markdown]
# ## 2. Slabs: reserved when the server starts
#
# A slab server gives every slot one contiguous slab big enough for the longest sequence it admits — its
# *maximum length*, 4,096 positions here — and reserves all of them when it starts: nobody knows how long the
# next sequence will grow. That keeps continuous batching simple (a slot's memory is ready the moment a
# sequence enters), but a sequence that ends after 60 tokens sits in room for 4,096.
#
# **Predict.** Over the long-tail run of 7.2 (32 slots), what percentage of the reserved KV holds tokens?

# %%
p_used = Predict(t("7.4.predict.used"), unit="%", lo=0, hi=100)
p_used

# %%
# NBVAL_CHECK_OUTPUT
sa = trace.step_arrays()
say("7.4.slots", slots=trace.num_slots, slab=trace.slab_tokens, rule=trace.slab_rule)
say("7.4.reserved", gb=sa.kv_reserved_bytes[0] / 1e9, slots=trace.num_slots, slab=trace.slab_tokens, bpp=per_position)
say("7.4.peak", gb=sa.kv_used_bytes.max() / 1e9)
say("7.4.share", share=ab.kv_used_share(trace))
print(p_used.reveal(round(100 * ab.kv_used_share(trace), 1)))

# %%
tw.show(trace, k=len(trace.steps) // 2, views=("kv",))

# %%
fig, ax = plt.subplots(figsize=(9, 3), layout="constrained")
ax.fill_between(sa.start_s, sa.kv_reserved_bytes / 1e9, step="post", color=PALETTE["kv_reserved"],
                label=t("7.4.fig.reserved"))
ax.fill_between(sa.start_s, sa.kv_used_bytes / 1e9, step="post", color=PALETTE["kv_used"],
                label=t("7.4.fig.used"))
ax.set(xlabel=t("7.4.fig.time"), ylabel=t("7.4.fig.kv_gb"), title=t("7.4.fig.title"))
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False);  # words: ok

# %% [markdown]
# The light area is memory held that holds nothing.
#
# ## 3. How many sequences fit?
#
# The H200 has 141 GB; the FP8 weights take about 70 GB; the KV memory is what is left after activations and
# runtime buffers. The long-tail traffic's sequences hold their prompt plus their answer: a few hundred tokens
# on average.
#
# **Predict.** How many sequences fit in the KV memory with one 4,096-position slab each?

# %%
p = Predict(t("7.4.predict.fit"), unit=t("7.4.unit.sequences"), lo=0, hi=1e6)
p

# %%
lengths = [r.prompt_len + r.max_new_tokens for r in traffic]
fit = sequences_that_fit(hw, lengths, max_len=trace.slab_tokens)

# %%
# NBVAL_CHECK_OUTPUT
print(p.reveal(fit.slabs))
say("7.4.one_slab", n=fit.slab_tokens, gb=fit.slab_tokens * fit.bytes_per_token / 1e9)
say("7.4.mean_seq", n=fit.mean_tokens, gb=fit.mean_tokens * fit.bytes_per_token / 1e9)
say("7.4.chapter")
say("7.4.engine", slabs=fit.slabs, exact=fit.exact, gain=fit.gain)

# %%
fig, ax = plt.subplots(figsize=(7, 2), layout="constrained")
ax.barh([t("7.4.bar.slabs"), t("7.4.bar.exact")], [fit.slabs, fit.exact],
        color=[PALETTE["kv_reserved"], PALETTE["kv_used"]])
for i, v in enumerate((fit.slabs, fit.exact)):
    ax.text(v, i, f" {v}", va="center")
ax.set(xlabel=t("7.4.bar.xlabel"), title=t("7.4.bar.title"),
       xlim=(0, fit.exact * 1.15));

# %% [markdown]
# 7.0 showed that a decode step serves many sequences for nearly the price of one, up to a few hundred. Slabs
# cap this GPU at a few dozen, far below that; exact allocation would let the batch grow toward it.
#
# **Try it.** Batch size and slab length (the server's maximum length) with the KV view: each move re-runs
# the dry run. A shorter slab fits more slots in the same memory but rejects every longer request (the status
# line counts them). "Run on the real model" runs 16 requests on the tiny GPT (a few seconds).

# %%
tw.Explorer("chapter-7.2-longtail", policy="continuous", views=("kv", "timeline"),
            controls=("batch_size", "max_model_len"), real_knobs={"n": 16}, k=800)

# %% [markdown]
# ## 4. What paging will fix
#
# Chapter 8 borrows the operating system's answer: cut KV memory into small fixed-size *blocks*, give each
# sequence a *page table* from its token positions to whichever blocks it was given, and hand out blocks as
# the sequence grows. A sequence then wastes at most part of its last block, and a freed block serves any other
# sequence at once. Below, four slots of the run at one step, laid out both ways (blocks drawn 256 positions
# long to be visible; real ones hold about 16). Each colour is one sequence.

# %%
fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained", width_ratios=[1.2, 1])
plot_slabs_and_pages(a1, a2, trace, k=len(trace.steps) // 2, block=256);

# %%
# NBVAL_CHECK_OUTPUT
block = 16
paged = ab.paged_positions(lengths, block)
say("7.4.paged", block=block, paged=paged, tokens=sum(lengths))
say("7.4.unused", unused=1 - sum(lengths) / paged, slab=trace.slab_tokens,
    slab_unused=1 - sum(lengths) / (len(lengths) * trace.slab_tokens))

# %% [markdown]
# That is PagedAttention; Chapter 8 adds eviction policies (H2O, InfiniGen) and prefix caching on top.
#
# ## What to remember
#
# * A sequence's KV cache grows by one position's keys and values per step, in every layer.
# * A slab server reserves the maximum length for every slot when it starts; with continuous batching, memory,
#   not the batch size knob, limits how many sequences run at once.
# * On a 70B model on one H200 slabs fit a few dozen sequences; exact allocation would fit several times more.
# * Paging (Chapter 8) hands out small blocks on demand through a page table, so reserved ≈ used.
#
# ## Questions
#
# 1. Why does a sequence's KV memory grow by the same amount at every step?
# 2. Why must a slab be sized for the longest sequence the server admits, not the one that is running?
# 3. What does the light area in the reserved-vs-used figure represent?
# 4. How does the slab limit on concurrency relate to the batch sizes where 7.0 showed decoding is cheap?
# 5. What does a page table map, and why does it let freed memory serve any other sequence?
