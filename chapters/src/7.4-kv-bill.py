# %% [markdown]
# # 7.4 The bill for Chapter 8: KV memory
#
# **What you will see.** Continuous batching lets sequences enter and leave every step. What then limits how
# many run at once is memory for their **KV cache**: the key and value vectors every token leaves in every
# layer, kept so later tokens can attend to it without recomputing. You will see how a simple server lays that
# memory out (one fixed *slab* per slot), how little of it holds tokens and how many sequences fit; then the
# same traffic with Chapter 8's pages. An appendix runs the blocks out and varies the block size.
#
# KV bytes are the modeled 70B-class model's (bf16 K and V, 8 KV heads × 128 dimensions × 80 layers), in the
# H200 memory left after the weights.

# %%
import matplotlib.pyplot as plt

import tinyserve
import tinyserve_widgets as tw
from tinyserve.analysis import batching as ab
from tinyserve.analysis.paged_cost import decode_ratios, load_paged_cost
from tinyserve.core.workloads import get_workload
from tinyserve.cost.kvfit import sequences_that_fit
from tinyserve.cost.presets import get_preset
from tinyserve.engine import Engine
from tinyserve.lang import ljust, say, t
from tinyserve.lang.glue import glue
from tinyserve_widgets.palette import PALETTE
from tinyserve_widgets.predict import Predict
from tinyserve_widgets.static import plot_slabs_and_pages

tinyserve.set_language("en")
dry = Engine()
hw = get_preset("h200-70b-fp8")
print(hw.text("description"))
say("7.4.kv_left", gb=hw.kv_memory_bytes / 1e9, n=hw.max_model_len)
glue("weights_gb", hw.weight_bytes / 1e9, "{:.0f}")
glue("kv_gb", hw.kv_memory_bytes / 1e9, "{:.0f}")

# %% [markdown]
# ## 1. A sequence's KV grows with it
#
# A sequence holding *n* tokens needs *n* × (bytes per position). The run below measures the bytes:

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
# next sequence will grow. A sequence that ends after 60 tokens still sits in room for 4,096.
#
# **Predict.** Over the long-tail run of 7.2 (32 slots), what percentage of the reserved KV holds tokens?

# %%
p_used = Predict(t("7.4.predict.used"), unit="%", lo=0, hi=100)
p_used

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_used.after_prediction():
    sa = trace.step_arrays()
    say("7.4.slots", slots=trace.num_slots, slab=trace.slab_tokens, rule=trace.slab_rule)
    say("7.4.reserved", gb=sa.kv_reserved_bytes[0] / 1e9, slots=trace.num_slots, slab=trace.slab_tokens, bpp=per_position)
    say("7.4.peak", gb=sa.kv_used_bytes.max() / 1e9)
    say("7.4.share", share=ab.kv_used_share(trace))
    print(p_used.reveal(round(100 * ab.kv_used_share(trace), 1)))


# %%
tw.show(trace, k=len(trace.steps) // 2, views=("kv",))

# %% [reveal, hide-code]
with p_used.after_prediction():
    fig, ax = plt.subplots(figsize=(9, 3), layout="constrained")
    ax.fill_between(sa.start_s, sa.kv_reserved_bytes / 1e9, step="post", color=PALETTE["kv_reserved"],
                    label=t("7.4.fig.reserved"))
    ax.fill_between(sa.start_s, sa.kv_used_bytes / 1e9, step="post", color=PALETTE["kv_used"],
                    label=t("7.4.fig.used"))
    ax.set(xlabel=t("7.4.fig.time"), ylabel=t("7.4.fig.kv_gb"), title=t("7.4.fig.title"))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False);  # words: ok


# %% [markdown]
# The light area is held and empty.
#
# ## 3. How many sequences fit?
#
# The H200 has 141 GB; the FP8 weights take about {glue}`weights_gb` GB; the KV memory is what is left after
# activations and runtime buffers. The long-tail traffic's sequences hold their prompt plus their answer:
# {glue}`mean_tokens` tokens on average.
#
# **Predict.** How many sequences fit in the KV memory with one 4,096-position slab each?

# %%
p = Predict(t("7.4.predict.fit"), unit=t("7.4.unit.sequences"), lo=0, hi=1e6)
p

# %%
lengths = [r.prompt_len + r.max_new_tokens for r in traffic]
fit = sequences_that_fit(hw, lengths, max_len=trace.slab_tokens)
# 7.0's two batch sizes, computed as 7.0 does: the ridge, and where a decode step (512 tokens of context) takes
# twice as long as one sequence's
from tinyserve.analysis.prefill import ridge_tokens
from tinyserve.cost.clock import ModeledClock

clock = ModeledClock("h200-70b-fp8")
glue("ridge", ridge_tokens(hw), "{:.0f}")
one_seq = clock.decode_step_time(1, 512)
glue("doubled", next(b for b in range(1, 4097) if clock.decode_step_time(b, 512) >= 2 * one_seq))

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p.after_prediction():
    print(p.reveal(fit.slabs))
    say("7.4.one_slab", n=fit.slab_tokens, gb=fit.slab_tokens * fit.bytes_per_token / 1e9)
    say("7.4.mean_seq", n=fit.mean_tokens, gb=fit.mean_tokens * fit.bytes_per_token / 1e9)
    say("7.4.chapter")
    glue("mean_tokens", fit.mean_tokens, "{:,.0f}")
    glue("fit_slabs", fit.slabs)
    glue("fit_exact", fit.exact)
    glue("fit_gain", fit.gain, "{:.0f}")
    say("7.4.engine", slabs=fit.slabs, exact=fit.exact, gain=fit.gain)


# %% [reveal, hide-code]
with p.after_prediction():
    fig, ax = plt.subplots(figsize=(7, 2), layout="constrained")
    ax.barh([t("7.4.bar.slabs"), t("7.4.bar.exact")], [fit.slabs, fit.exact],
            color=[PALETTE["kv_reserved"], PALETTE["kv_used"]])
    for i, v in enumerate((fit.slabs, fit.exact)):
        ax.text(v, i, f" {v}", va="center")
    ax.set(xlabel=t("7.4.bar.xlabel"), title=t("7.4.bar.title"),
           xlim=(0, fit.exact * 1.15));


# %% [markdown]
# 7.0 showed that extra sequences ride almost free in a decode step up to the ridge, about {glue}`ridge` a step,
# and that the step takes twice one sequence's time only at B = {glue}`doubled`. Slabs cap this GPU at
# {glue}`fit_slabs`, far below the ridge; exact allocation would fit {glue}`fit_exact`, past it.
#
# **Try it.** Move the batch size and the slab length: a shorter slab fits more slots but rejects every longer
# request (the status line counts them). "Run on the real model" runs 16 requests on the tiny GPT.

# %%
tw.Explorer("chapter-7.2-longtail", policy="continuous", views=("kv", "timeline"),
            controls=("batch_size", "max_model_len"), real_knobs={"n": 16}, k=800)

# %% [markdown]
# ## 4. Pages instead of slabs
#
# Chapter 8 borrows the operating system's answer: cut KV memory into small fixed-size *blocks*, give each
# sequence a *page table* from its token positions to its blocks, and hand out blocks as the sequence grows. A
# sequence then wastes at most part of its last block, and a freed block serves any other sequence at once.
# Below, four slots at one step, both ways (blocks drawn 256 positions long to be visible; real ones hold 16).

# %%
fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained", width_ratios=[1.2, 1])
plot_slabs_and_pages(a1, a2, trace, k=len(trace.steps) // 2, block=256);

# %% [markdown]
# The engine has this layout too (`kv_layout="paged"`, blocks of 16 positions as in vLLM). A paged run keeps a
# batch cap (256 here, vLLM's default `max_num_seqs`) but reserves nothing per sequence: a newcomer gets in
# while the free blocks hold its prompt. Both layouts get the same {glue}`kv_gb` GB of KV memory.
#
# ## 5. The same traffic, slabs then pages
#
# At the workload's default 8 requests/s all {glue}`slab_slots` slabs are busy only about {glue}`all_busy_share` of
# the time, so pages have little to add. At 16 requests/s requests queue for a slab. Each row below is a dry run
# of the same 300 requests and arrivals.
#
# **Predict.** At 16 requests/s, slabs run at most {glue}`slab_peak` sequences at once. With pages, at most how
# many?

# %%
p_pages = Predict(t("7.4.predict.pages"), unit=t("7.4.unit.sequences"), lo=0, hi=256)
p_pages

# %%
# the long-tail traffic (n requests at `rate` req/s) on the H200 preset, a batch cap of 256, as a dry run
def serve(layout, rate, n=300, block_size=None):
    return dry.run("chapter-7.2-longtail", "continuous", batch_size=256, dry_run=True, progress=False,
                   kv_layout=layout, block_size=block_size, workload_knobs={"rate": rate, "n": n})


runs = {(rate, layout): serve(layout, rate) for rate in (8.0, 16.0) for layout in ("slab", "paged")}
# what the text above says of the default load: how many slabs, and for what share of the time all are busy
slab8 = runs[8.0, "slab"]
sa8 = slab8.step_arrays()
glue("slab_slots", slab8.num_slots)
all_busy = sa8.duration_s[sa8.busy_slots == slab8.num_slots].sum() / sa8.duration_s.sum()  # time-weighted
glue("all_busy_share", all_busy, "{:.0%}")

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_pages.after_prediction():
    say("7.4.cmp.head")
    for (rate, layout), tr in runs.items():
        say("7.4.cmp.row", rate=rate, layout=ljust(t(f"7.4.layout.{layout}"), 6), **ab.layout_summary(tr))
    slabs, pages = ab.layout_summary(runs[16.0, "slab"]), ab.layout_summary(runs[16.0, "paged"])
    print(p_pages.reveal(pages["peak"]))
    glue("slab_peak", slabs["peak"])  # the premise of the prediction above
    glue("pages_gain", pages["peak"] / slabs["peak"], "{:.1f}")
    glue("paged_peak_share", runs[16.0, "paged"].metrics()["kv_reserved_bytes_peak"] / hw.kv_memory_bytes, "{:.0%}")
    say("7.4.cmp.engine", slabs=slabs["peak"], pages=pages["peak"], fit=fit.exact,
        gain=pages["tok_s"] / slabs["tok_s"], ttft_s=slabs["ttft_p99"], ttft_p=pages["ttft_p99"])


# %% [reveal, hide-code]
with p_pages.after_prediction():
    paged16 = runs[16.0, "paged"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.2), layout="constrained")
    for layout, color in (("slab", PALETTE["kv_reserved"]), ("paged", PALETTE["kv_used"])):
        sa16 = runs[16.0, layout].step_arrays()
        a1.plot(sa16.start_s, sa16.busy_slots, lw=0.8, color=color, label=t(f"7.4.layout.{layout}"))
        a2.plot(sa16.start_s, sa16.num_waiting, lw=0.8, color=color, label=t(f"7.4.layout.{layout}"))
    a1.set(xlabel=t("7.4.fig.time"), ylabel=t("7.4.cmp.fig.running"), title=t("7.4.cmp.fig.running_title"))
    a2.set(xlabel=t("7.4.fig.time"), ylabel=t("7.4.cmp.fig.waiting"), title=t("7.4.cmp.fig.waiting_title"))
    a1.legend(fontsize=8, frameon=False);


# %% [markdown]
# Pages let the batch grow to where the traffic needs it: the queue for a place in the batch is gone and time
# to first token drops from seconds to under one. The p99 end-to-end latency barely moves: the slowest requests
# are long RAG answers: they wait far less, but decode in slower steps shared by many more sequences, and the two
# roughly cancel. The blocks never ran out: at the peak they held about {glue}`paged_peak_share` of the memory (the
# appendix runs them out).
#
# The KV view of the paged run: held and used now nearly coincide.

# %%
tw.show(paged16, k=len(paged16.steps) // 2, views=("kv",))

# %% [markdown]
# ## What comes next
#
# Chapter 8 goes further than this engine. **Eviction policies** such as H2O keep only the keys attention still
# uses, so a sequence's KV stops growing with its length. **Prefix caching** lets requests that start with the
# same prompt share that prefix's blocks instead of computing and storing it again.
#
# ## What to remember
#
# * A sequence's KV cache grows by one position's keys and values per step, in every layer.
# * A slab server reserves the maximum length for every slot at start; with continuous batching, memory, not
#   the batch size knob, limits how many sequences run at once.
# * On a 70B model on one H200 slabs fit {glue}`fit_slabs` sequences of this traffic; allocating what each uses
#   fits about {glue}`fit_gain` times as many.
# * Paging hands out small blocks on demand through a page table, so held ≈ used. On the same traffic at
#   16 requests/s it ran {glue}`pages_gain` times as many sequences at once and cut TTFT p99 from seconds to
#   under one.
#
# ## Questions
#
# 1. Why must a slab be sized for the longest sequence the server admits, not the one that is running?
# 2. What does a page table map, and why does it let freed memory serve any other sequence?
# 3. Why did pages cut TTFT p99 so much but leave the e2e p99 almost where it was?

# %% [markdown]
# ## Appendix: when the blocks run out, and the block size
#
# ### When the blocks run out
#
# Keep the same rate for twice as long (600 requests): the queue keeps growing, the engine admits until the
# pool is full, and then a sequence needs a block that nobody has. The engine does what vLLM does: it
# *preempts* the most recently admitted sequence (the oldest ones keep moving, so everyone finishes), frees
# its blocks, puts it back at the front of the queue, and later recomputes its K/V with a prefill of its prompt
# and the tokens it had already made. Its answer does not change; the recomputation is extra work (vLLM can
# also swap the blocks to CPU memory instead).

# %%
import numpy as np

long_runs = {layout: serve(layout, 16.0, n=600) for layout in ("slab", "paged")}

# %%
# NBVAL_CHECK_OUTPUT
say("7.4.cmp.head")
for layout, tr in long_runs.items():
    say("7.4.cmp.row", rate=16.0, layout=ljust(t(f"7.4.layout.{layout}"), 6), **ab.layout_summary(tr))
pm = long_runs["paged"].metrics()
say("7.4.preempt", n=pm["preemptions"], tokens=pm["recomputed_tokens"],
    share=pm["recomputed_tokens"] / pm["prefill_tokens"], peak=pm["blocks_used_peak"],
    blocks=long_runs["paged"].num_blocks)

# %% [hide-code]
used, free, waste = ab.block_columns(long_runs["paged"])
bs = long_runs["paged"].block_size
steps = np.arange(len(used))
fig, ax = plt.subplots(figsize=(9, 3.2), layout="constrained")
ax.stackplot(steps, used - waste / bs, waste / bs, free, step="post",
             colors=[PALETTE["kv_used"], PALETTE["wasted"], PALETTE["kv_reserved"]],
             labels=[t("7.4.blocks.fig.filled"), t("7.4.blocks.fig.waste"), t("7.4.blocks.fig.free")])
hit = np.flatnonzero(long_runs["paged"].step_arrays().preempted)
ax.plot(hit, np.full(len(hit), long_runs["paged"].num_blocks * 1.02), "v", ms=4, color=PALETTE["accent"],
        label=t("7.4.blocks.fig.preempted"))
ax.set(xlabel=t("7.4.blocks.fig.step"), ylabel=t("7.4.blocks.fig.blocks"), title=t("7.4.blocks.fig.title"))
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False);

# %%
tw.show(long_runs["paged"], k=int(hit[0]) if len(hit) else 0, views=("timeline", "blocks"))

# %% [markdown]
# Blocks holding tokens fill the pool; the free band shrinks to nothing where the markers sit. The internal
# waste (the unfilled tail of each last block) is only a thin line on top at 16 positions a block; its size is
# the next section's knob.
#
# The block map above shows the same run block by block, under the slot timeline's cursor, which starts at the
# first preemption: drag the step slider to watch blocks handed out as sequences grow and returned when they
# finish, and hover a block to see which sequence owns it.
#
# ### Block size: waste against table length
#
# A block of 1 position wastes nothing but gives every sequence a table entry per token, and the attention
# kernel reads K/V one tiny piece at a time. A block of 256 keeps tables short but leaves up to 255 empty
# positions in every sequence's last block. The same 16 requests/s run with three sizes:

# %%
by_size = {b: serve("paged", 16.0, block_size=b) for b in (1, 16, 256)}

# %%
# NBVAL_CHECK_OUTPUT
b16 = by_size[16]  # what the text below says of vLLM's block size: its waste, its tables, a block's K/V per layer
glue("waste_16", ab.block_waste_share(b16), "{:.1%}")
glue("entries_16", ab.table_entries_per_sequence(b16), "{:.0f}")
glue("block_kb", b16.block_size * b16.kv_bytes_per_token / hw.n_layer / 1024, "{:.0f}")
# what a paged decode step costs the real engine on this CPU against a slab one (benchmarks/paged.py's table)
paged_steps = decode_ratios(load_paged_cost())
glue("paged_step_median", paged_steps["median"], "{:.2f}")
glue("paged_step_max", paged_steps["max"], "{:.2f}")
glue("paged_step_max_batch", paged_steps["max_batch"])
glue("paged_step_max_context", paged_steps["max_context"], "{:,}")
say("7.4.bsize.head")
for b, tr in by_size.items():
    used_b, _, waste_b = ab.block_columns(tr)
    say("7.4.bsize.row", size=b, entries=ab.table_entries_per_sequence(tr), peak=int(used_b.max()),
        share=ab.block_waste_share(tr), gb=waste_b.max() * tr.kv_bytes_per_token / 1e9,
        seqs=ab.layout_summary(tr)["peak"])

# %% [markdown]
# At this load the pool never fills, so all three run the same schedule: the waste costs memory, not yet sequences.
# With 16 the waste stays at {glue}`waste_16` and the tables {glue}`entries_16` entries long; vLLM's default is 16
# too. The modeled clock charges the table nothing (one 4-byte block id per {glue}`block_kb` KB of K and V read,
# per layer). The vLLM paper's block-size experiments found that too small a block leaves the GPU's parallelism
# unused while reading K/V (Kwon et al. 2023, sec. 7.2); this clock does not model that cost.
#
# Reading through a table is not free everywhere. vLLM's paged kernel reads each block where it lies; the paper
# measured it 20–26% slower than a kernel reading one contiguous slab (Kwon et al. 2023, sec. 7.1). The tiny engine
# in this course has no such kernel: on this CPU it copies a call's blocks into one reused buffer, a few sequences at
# a time, and attends over the copy while it is still in cache. Measured side by side (`benchmarks/paged.py`), a
# paged decode step takes {glue}`paged_step_median` times the slab step typically and up to {glue}`paged_step_max`
# times (a batch of {glue}`paged_step_max_batch`, each sequence {glue}`paged_step_max_context` positions long).
#
# **Question.** When the blocks ran out, the engine preempted the most recently admitted sequence. Why that one
# rather than the longest?
