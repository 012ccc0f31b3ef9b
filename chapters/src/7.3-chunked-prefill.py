# %% [markdown]
# # 7.3 Chunked prefill: prefill and decode on one chip
#
# **What you will see in this notebook**
#
# 1. Thirty users receiving tokens steadily, then a 4,000-token prompt arrives. Its prefill is a big,
#    compute-heavy step; their decodes are small, memory-heavy steps. Who waits?
# 2. *Prefill-first* stalls the thirty; *decode-first* stalls the newcomer (F8).
# 3. *Chunked prefill* cuts the prompt into pieces that ride along with the decodes, step after step: both
#    waits shrink.
# 4. A chunk-length knob that traces the trade-off curve, and what is left over for Chapter 12.
#
# Times are modeled for a 70B-class model on one H200 (the same numbers on every machine); the schedule is
# made by the real engine.

# %%
import math


import numpy as np
import matplotlib.pyplot as plt

import tinyserve
from tinyserve.engine import Engine
from tinyserve.workloads import get_workload
from tinyserve_widgets.static import plot_composition
from tinyserve_widgets.predict import Predict


# ▶ CHAPTER_SCALE: False checks the real model on one policy (seconds); True runs all three policies on it.
CHAPTER_SCALE = False

engine = tinyserve.shared_engine()
dry = Engine()
scenario = get_workload("chapter-7.3-long-prompt")
newcomer = next(r for r in scenario if r.id == "long")
print(f"{len(scenario) - 1} requests decoding ({scenario[0].max_new_tokens} tokens each); "
      f"'long' ({newcomer.prompt_len:,}-token prompt) arrives at {newcomer.arrival_s} s")
step_ms = 1e3 * dry.run(scenario[:-1], "continuous", batch_size=32, dry_run=True, progress=False).steps[10].duration_s
print(f"a decode step of the thirty takes {step_ms:.1f} ms (modeled)")

# %% [markdown]
# ## 1. Two bad choices
#
# Two things we measure for every policy, both on the modeled clock:
#
# * **worst gap**: the longest wait between two consecutive tokens of any of the thirty in-flight users (what
#   an existing user feels as a stutter), and
# * **newcomer TTFT**: how long the 4,000-token request waits for its first token.
#
# **Predict.** With *prefill-first* (the whole prompt in the next step, beside the thirty decodes), how long
# will the thirty users' worst gap be, in milliseconds? (A plain decode step of the thirty is printed above.)

# %%
p_gap = Predict("Worst gap between two tokens of the thirty under prefill-first?", unit="ms", lo=0)
p_gap

# %%
def worst_gap_ms(trace):
    """Longest time between two consecutive tokens of any in-flight request (all but 'long')."""
    return 1e3 * max(float(np.max(np.diff(r.token_times))) for r in trace.requests if r.id != "long")


def ttft_ms(trace):
    r = trace.request("long")
    return 1e3 * (r.first_token_s - r.arrival_s)


policies = {
    "prefill-first": dict(policy="continuous", max_waiting_steps=0),
    "decode-first": dict(policy="continuous", max_waiting_steps=math.inf),
    "decode-first, forced in after 20 steps": dict(policy="continuous", max_waiting_steps=20),
    "chunked, 512-token chunks": dict(policy="chunked", chunk_size=512),
}


def run(kw, eng=dry, **more):
    kw = dict(kw, **more)
    return eng.run(scenario, kw.pop("policy"), batch_size=32, dry_run=eng is dry, progress=False, **kw)


traces = {name: run(kw) for name, kw in policies.items()}

# %%
# NBVAL_CHECK_OUTPUT
print(f"{'policy':40s} {'worst gap':>10s} {'newcomer TTFT':>14s}")
for name, tr in traces.items():
    print(f"{name:40s} {worst_gap_ms(tr):8.1f} ms {ttft_ms(tr):11.1f} ms")
pf, df, ch = (traces[k] for k in ("prefill-first", "decode-first", "chunked, 512-token chunks"))
print(f"\nF8: prefill-first stalls the thirty for {worst_gap_ms(pf):.0f} ms; "
      f"decode-first makes the newcomer wait {ttft_ms(df) / 1e3:.1f} s;")
print(f"    512-token chunks: worst gap {worst_gap_ms(ch):.0f} ms and newcomer TTFT {ttft_ms(ch):.0f} ms")
print(p_gap.reveal(round(worst_gap_ms(pf), 1)))

# %% [markdown]
# Prefill-first gives the newcomer its first token fast, but every one of the thirty users sees a stall of
# about half a second. Decode-first keeps them smooth but parks the newcomer until the others are done —
# seconds. Forcing the newcomer in after a bounded wait (as TGI's router does) only moves the stall: the thirty
# still wait for one huge step, just later.

# %% [markdown]
# ## 2. What the steps look like
#
# In the tokens-per-step panel each bar is one step: green = decode tokens, blue = prefill tokens, the dashed line the token budget
# (chunked only). In the waiting panel, what the users feel: the longest wait between two tokens of an in-flight request at
# that step (black line) and the newcomer's time to its first token (diamond), in modeled milliseconds. The
# vertical line is the cursor: below, the step where the newcomer is first computed.

# %%
arrival = next(s.index for s in pf.steps if any(w.request_id == "long" for w in s.works))
first_chunk = next(s.index for s in ch.steps if any(w.request_id == "long" for w in s.works))
import tinyserve_widgets as tw

tw.show(ch, k=first_chunk, views=("composition",))  # the live view, at the newcomer's first chunk

# %%
fig, ax = plt.subplots(3, 2, figsize=(11, 9))
for row, name in zip(ax, ("prefill-first", "decode-first, forced in after 20 steps", "chunked, 512-token chunks")):
    tr = traces[name]
    first = next(s.index for s in tr.steps if any(w.request_id == "long" for w in s.works))
    plot_composition(row[0], row[1], tr, first)  # cursor at the newcomer's first computed step
    for a in row:
        a.set_xlim(max(0, arrival - 5), arrival + 40)
    row[0].set_title(f"{name}: tokens per step", fontsize=10)
plt.tight_layout()

# %% [markdown]
# Under chunked prefill the prompt enters as eight 512-token pieces in eight consecutive steps. Each of those
# steps is heavier than a plain decode step, but none is anywhere near the single 4,000-token step. The
# decodes keep coming, a little slower for eight steps.
#
# Why this is nearly free on a GPU: a decode step is memory-bound — it streams all the weights to make one
# token per sequence, leaving the arithmetic units mostly idle. A prefill chunk is arithmetic-heavy. Put into
# the same step, the chunk uses the idle arithmetic while the weights stream past once for both.

# %% [markdown]
# ## 3. The chunk length is a knob
#
# Small chunks: tiny stalls, but the prompt needs many steps. Large chunks: fewer steps, bigger stalls. The
# extremes are the two bad choices of section 1. Sweep it.
#
# **Predict.** Which chunk length gives the newcomer its first token *soonest*: 64, 512, or 4,096 tokens?

# %%
p_chunk = Predict("Which chunk length gives the newcomer its first token soonest: 64, 512 or 4096?", unit="tokens", lo=1)
p_chunk

# %%
chunks = [64, 128, 256, 512, 1024, 2048, 4096]
sweep = {c: run(policies["chunked, 512-token chunks"], chunk_size=c) for c in chunks}
bounded = {n: run(policies["decode-first"], max_waiting_steps=n) for n in (0, 5, 20, 50, 100, 200, math.inf)}

# %%
# NBVAL_CHECK_OUTPUT
print(f"{'chunk':>6s} {'worst gap':>10s} {'newcomer TTFT':>14s}")
for c, tr in sweep.items():
    print(f"{c:6d} {worst_gap_ms(tr):8.1f} ms {ttft_ms(tr):11.1f} ms")
best = min(sweep, key=lambda c: ttft_ms(sweep[c]))
print(f"soonest first token with {best}-token chunks")
print(p_chunk.reveal(best))

# %%
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot([ttft_ms(t) for t in sweep.values()], [worst_gap_ms(t) for t in sweep.values()], "o-",
        label="chunked prefill (chunk length)")
for c, tr in sweep.items():
    ax.annotate(str(c), (ttft_ms(tr), worst_gap_ms(tr)), textcoords="offset points", xytext=(4, 4), fontsize=8)
ax.plot([ttft_ms(t) for t in bounded.values()], [worst_gap_ms(t) for t in bounded.values()], "s--",
        color="grey", label="whole prefill, after waiting N steps")
for n, tr in bounded.items():
    ax.annotate("∞" if n == math.inf else str(n), (ttft_ms(tr), worst_gap_ms(tr)), textcoords="offset points",
                xytext=(4, -10), fontsize=8, color="grey")
ax.set(xscale="log", yscale="log", xlabel="newcomer's time to first token (ms, modeled)",
       ylabel="in-flight users' worst gap (ms, modeled)", title="the trade-off: lower-left is better")
ax.legend(fontsize=8);

# %% [markdown]
# **Try it.** Move the chunk length and the token budget (or switch to `continuous` and choose prefill- or
# decode-first) and watch each step's composition, the in-flight users' gaps and the newcomer's wait.

# %%
tw.Explorer("chapter-7.3-long-prompt", policy="chunked", chunk_size=512, views=("composition",),
            controls=("policy", "chunk_size", "max_batch_tokens", "order", "max_waiting_steps"), real_button=False)

# %% [markdown]
# Without chunking (grey), waiting N steps only postpones the same big stall: every finite N stalls the thirty
# just as long *and* makes the newcomer wait longer; only never interrupting them (∞) spares the thirty, and
# then the newcomer waits seconds. Chunking (blue) opens up the lower left: for moderate chunk lengths both
# numbers are small at once. The newcomer always gets its first token soonest in
# one big step — every extra step pays the weight stream and the fixed overhead again — so the smallest chunks
# make it wait longest: the knob trades its wait against everybody else's.
#
# Under chunked prefill every in-flight request decodes in every step, so each gap between two of its tokens is
# exactly one step — and no step can carry more than the token budget. The worst stall is therefore bounded by
# the time of one full-budget step at the deepest context, whatever arrives (in this engine admitting a
# newcomer costs no extra step). The project's tests check this bound on random workloads
# (`tests/test_stall_bound.py`); here it is for each chunk length of the sweep:

# %%
# NBVAL_CHECK_OUTPUT
from tinyserve.sweeps import stall_bound_s

deepest = max(r.prompt_len + r.max_new_tokens for r in scenario)
for c, tr in sweep.items():
    bound = 1e3 * stall_bound_s(tr.knobs["max_batch_tokens"], deepest, batch_size=32)
    print(f"chunk {c:4d} (budget {tr.knobs['max_batch_tokens']:4d} tokens): worst gap {worst_gap_ms(tr):6.1f} ms "
          f"<= bound {bound:6.1f} ms: {worst_gap_ms(tr) <= bound}")

# %% [markdown]
# ## 4. The same schedule on the real model

# %%
check = ["chunked, 512-token chunks"] + (["prefill-first", "decode-first"] if CHAPTER_SCALE else [])
real = {name: run(policies[name], eng=engine) for name in check}

# %%
# NBVAL_CHECK_OUTPUT
def composition(tr):
    return [[(w.slot, w.request_id, w.phase, w.start, w.tokens) for w in s.works] for s in tr.steps]


for name, tr in real.items():
    print(f"{name}: real model, {len(tr.steps)} steps; same schedule as the dry run: "
          f"{composition(tr) == composition(traces[name])}")

# %% [markdown]
# ## 5. What chunking cannot fix
#
# Chunking spreads prefill work thin, but the work is still there. When many long prompts arrive at once, every
# step carries a full chunk and the decodes slow down for as long as the prompts keep coming; lowering the
# budget protects the decodes and lengthens every newcomer's wait. Past that point the two phases really do
# compete for one chip — which is why Chapter 12 runs them on *different* chips (disaggregated serving).
#
# The long-tail traffic of 7.2 (150 requests, a fifth with 800–2,500-token prompts) at a moderate and a heavy
# arrival rate, under chunked prefill with three chunk lengths:

# %%
# NBVAL_CHECK_OUTPUT
print(f"{'rate':>7s} {'chunk':>6s} {'p99 gap':>9s} {'TTFT p50':>9s} {'TTFT p99':>9s}")
for rate in (4, 16):
    heavy = get_workload("chapter-7.2-longtail", rate=rate, n=150)
    for c in (128, 512, 2048):
        m = dry.run(heavy, "chunked", batch_size=32, chunk_size=c, dry_run=True, progress=False).metrics()
        print(f"{rate:5d}/s {c:6d} {m['itl_ms']['p99']:6.0f} ms {m['ttft_ms']['p50'] / 1e3:7.2f} s "
              f"{m['ttft_ms']['p99'] / 1e3:7.2f} s")

# %% [markdown]
# At 4 requests/s a 512-token chunk keeps both the gaps and the waits short. At 16 requests/s no chunk length
# does: small chunks keep the decodes smooth while newcomers queue for seconds, large chunks make everyone
# stutter and the queue is still long. The chip simply has more prefill *and* decode work than one schedule
# can hide.

# %% [markdown]
# ## What to remember
#
# * A newcomer's prefill and the in-flight decodes pull in opposite directions: run the whole prefill now and
#   the decodes stall; wait and the newcomer stalls (**F8**).
# * Chunked prefill splits the prompt into pieces that share steps with the decodes, so both waits stay short.
# * The chunk length (token budget) is the knob: it bounds the worst stall and sets how fast a prompt gets in.
# * When prefill traffic is heavy enough, the phases still compete: the reason for disaggregated serving.
#
# ## Questions
#
# 1. Why is a prefill step compute-bound and a decode step memory-bound?
# 2. Under prefill-first, who pays for a 4,000-token prompt, and how?
# 3. Why does bounding decode-first's wait not remove the stall?
# 4. What limits how small a useful chunk can be?
# 5. In one sentence: what does a chunked step share between the prefill and the decodes?
