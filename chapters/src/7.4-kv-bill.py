# %% [markdown]
# # 7.4 The bill for Chapter 8: KV memory
#
# **What you will see in this notebook**
#
# 1. Each running sequence carries a KV cache (the keys and values of every token it has seen) that grows by
#    one token per step.
# 2. The engine's simple layout — one fixed *slab* per slot, sized for the longest sequence allowed — and how
#    much of what it reserves is actually used during a continuous-batching run.
# 3. How many sequences a 70B model on one H200 can hold with slabs, and how many it could hold if each
#    sequence took only what it uses (F9).
# 4. What Chapter 8's paging changes.
#
# KV bytes here are those of the modeled 70B-class model (bf16 K and V, 8 KV heads × 128 dimensions × 80
# layers) in the memory an H200 has left after the weights.

# %%

import numpy as np
import matplotlib.pyplot as plt

import tinyserve
from tinyserve.cache import sequences_that_fit
from tinyserve.clock import get_preset
from tinyserve.engine import Engine
from tinyserve.workloads import get_workload
from tinyserve_widgets.predict import Predict


dry = Engine()
hw = get_preset("h200-70b-fp8")
print(hw.description)
print(f"KV per token: {hw.kv_bytes_per_token:,.0f} bytes ({hw.kv_dtype}); "
      f"memory left for KV after the weights: {hw.kv_memory_bytes / 1e9:.2f} GB")

# %% [markdown]
# ## 1. A sequence's KV grows with it
#
# Every token a sequence processes leaves its key and value vectors in every layer, so the next tokens can
# attend to it. A sequence holding *n* tokens needs *n* × (bytes per token). For this model:

# %%
# NBVAL_CHECK_OUTPUT
for n in (100, 1000, 4096):
    print(f"{n:5d} tokens of context: {n * hw.kv_bytes_per_token / 1e9:6.3f} GB of KV")

# %% [markdown]
# ## 2. Slabs: reserve the maximum, use what you need
#
# The engine gives every slot one contiguous slab big enough for the longest sequence it may hold. That makes
# continuous batching simple — a slot's memory is ready the moment a new sequence enters — but a sequence
# that ends after 60 tokens has reserved room for thousands. Run the long-tail traffic of 7.2 with continuous
# batching and compare, step by step, what the slabs reserve with what the sequences use.

# %%
traffic = get_workload("chapter-7.2-longtail")
trace = dry.run(traffic, "continuous", batch_size=32, dry_run=True, progress=False)
reserved = np.array([s.kv_reserved_bytes for s in trace.steps], dtype=np.float64)
used = np.array([s.kv_used_bytes for s in trace.steps], dtype=np.float64)
dur = np.array([s.duration_s for s in trace.steps], dtype=np.float64)

# %%
# NBVAL_CHECK_OUTPUT
print(f"KV bytes in: {trace.kv_units} units; {trace.num_slots} slots")
print(f"peak reserved {reserved.max() / 1e9:.1f} GB, peak used {used.max() / 1e9:.1f} GB")
share = float(np.sum(used * dur) / np.sum(reserved * dur))
print(f"over the run (time-weighted), the sequences use {share:.1%} of the KV memory their slabs reserve")

# %%
import tinyserve_widgets as tw

tw.show(trace, k=len(trace.steps) // 2, views=("kv",))

# %%
t = np.array([s.start_s for s in trace.steps])
fig, ax = plt.subplots(figsize=(9, 3))
ax.fill_between(t, reserved / 1e9, step="post", color="#bab0ac", label="reserved by slabs")
ax.fill_between(t, used / 1e9, step="post", color="#4c78a8", label="used by the sequences' tokens")
ax.set(xlabel="time (s, modeled)", ylabel="KV memory (GB)", title="continuous batching with one slab per slot")
ax.legend(fontsize=8, loc="upper right");

# %% [markdown]
# The grey area is memory that is held but holds nothing. Sequences come and go every step and nobody knows
# in advance how long each one will get, so the slab has to be sized for the worst case.

# %% [markdown]
# ## 3. How many sequences fit? (F9)
#
# The H200 has 141 GB; the FP8 weights take about 70 GB, and what is left after activations and runtime
# buffers is the KV memory printed above. Suppose every
# sequence may grow to the model's 4,096-token context, so a slab holds 4,096 tokens. The long-tail traffic's
# sequences really hold their prompt plus their answer — a few hundred tokens on average.
#
# **Predict.** How many sequences fit in the KV memory with one 4,096-token slab each?

# %%
p = Predict("How many sequences fit with one 4,096-token slab each?", unit="sequences", lo=0)
p

# %%
lengths = [r.prompt_len + r.max_new_tokens for r in traffic]
fit = sequences_that_fit(hw, lengths, max_len=4096)

# %%
# NBVAL_CHECK_OUTPUT
print(p.reveal(fit.slabs))
print(f"one slab = {fit.slab_tokens:,} tokens = {fit.slab_tokens * fit.bytes_per_token / 1e9:.2f} GB")
print(f"mean sequence of this traffic: {fit.mean_tokens:.0f} tokens = {fit.mean_tokens * fit.bytes_per_token / 1e9:.3f} GB")
print(f"F9: slabs fit {fit.slabs} sequences; allocating exactly what each uses would fit {fit.exact} "
      f"({fit.gain:.1f}× as many)")

# %%
fig, ax = plt.subplots(figsize=(6, 2))
ax.barh(["one slab per sequence", "exactly what each uses"], [fit.slabs, fit.exact], color=["#bab0ac", "#4c78a8"])
for i, v in enumerate((fit.slabs, fit.exact)):
    ax.text(v, i, f" {v}", va="center")
ax.set(xlabel="sequences that fit in the KV memory", title="70B on one H200: concurrency left on the table");

# %% [markdown]
# 7.0 showed that a decode step serves many sequences for nearly the price of one, up to a few hundred per
# step. Slabs cap this GPU at a few dozen concurrent sequences, far below that knee; exact allocation would let
# the batch grow toward it. The slab layout hands back much of what continuous batching won.

# %% [markdown]
# ## 4. What paging will fix
#
# Chapter 8 borrows the operating system's answer to the same problem in RAM: cut KV memory into small
# fixed-size *blocks* (say 16 tokens each), give each sequence a *page table* from its token positions to
# whichever blocks it was given, and hand out blocks one at a time as the sequence grows. A sequence then
# wastes at most the unused part of its last block, blocks freed by one sequence serve any other at once, and
# identical prefixes can even share blocks. That is PagedAttention; Chapter 8 adds eviction policies (H2O,
# InfiniGen) and prefix caching on top.

# %%
# NBVAL_CHECK_OUTPUT
block = 16
blocks = sum(-(-n // block) for n in lengths)  # each sequence rounds up to whole blocks
print(f"with {block}-token blocks this traffic's sequences hold {blocks * block:,} positions for {sum(lengths):,} tokens:")
print(f"{1 - sum(lengths) / (blocks * block):.1%} of the reservation unused "
      f"(with 4,096-token slabs: {1 - sum(lengths) / (len(lengths) * 4096):.1%})")

# %% [markdown]
# ## What to remember
#
# * A sequence's KV cache grows by one token's keys and values per step, in every layer.
# * With continuous batching, sequences of unknown length enter and leave every step; memory, not the batch
#   size knob, becomes the limit on how many run at once.
# * One slab per slot reserves the worst case: on a 70B model on one H200 that fits a few dozen sequences,
#   while exact allocation would fit several times more (**F9**).
# * Paging (Chapter 8) allocates small blocks on demand through a page table, so reserved ≈ used.
#
# ## Questions
#
# 1. Why does a sequence's KV memory grow by the same amount at every step?
# 2. Why must a slab be sized for the longest sequence allowed, not the one that is running?
# 3. What does the grey area in the reserved-vs-used figure represent?
# 4. How does the slab limit on concurrency relate to the batch sizes where 7.0 showed decoding is cheap?
# 5. What does a page table map, and why does it let freed memory serve any other sequence?
