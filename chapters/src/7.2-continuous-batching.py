# %% [markdown]
# # 7.2 Continuous batching: scheduling each iteration
#
# **What you will see.** The fastest-finisher workload of 7.1 again, now with a scheduler that re-decides the
# batch after *every* step (an *iteration*): a finished request leaves its slot at once and a waiting one takes
# it. You will watch slots change hands in one step, see a 20-token request finish in 20 iterations whoever
# shares the batch, and measure how busy a modeled 70B GPU is kept on realistic traffic, at several loads.
#
# Orca called this *iteration-level scheduling*, NVIDIA *in-flight batching*; vLLM and TGI are built on it.

# %%
import numpy as np
import matplotlib.pyplot as plt

import tinyserve
tinyserve.set_language("en")
import tinyserve_widgets as tw
from tinyserve.analysis import batching as ab
from tinyserve.core.workloads import get_workload
from tinyserve.engine import Engine
from tinyserve.lang import say, t
from tinyserve.lang.glue import glue
from tinyserve_widgets.palette import PALETTE
from tinyserve_widgets.predict import Predict
from tinyserve_widgets.static import plot_timeline

# ▶ CHAPTER_SCALE: False runs 16 requests of the long-tail traffic on the real model (seconds);
#   True runs all of them. Checked numbers come from dry runs of the full workloads either way.
CHAPTER_SCALE = False

engine = tinyserve.shared_engine()
dry = Engine()  # dry runs: same scheduler and cost model, no forward passes

# %% [markdown]
# ## 1. The fastest finisher, continuously
#
# Same 63 requests as in 7.1 (r0 wants 2,000 tokens, the other 62 want 20), same 32 slots, policy `continuous`.
#
# **Predict.** In 7.1 a 20-token request queued behind the first group was done after about
# {glue}`static_queued_steps` steps. How many steps will it take now?

# %%
p_queue = Predict(t("7.2.predict.queue"), unit=t("7.2.unit.steps"), lo=0, hi=1e5)
p_queue

# %%
cont = dry.run("chapter-7.1-finisher", "continuous", batch_size=32, dry_run=True, progress=False)
stat = dry.run("chapter-7.1-finisher", "static", batch_size=32, dry_run=True, progress=False)
ra = cont.request_arrays()
twenty = ra.output_len == 20
queued = [i for i, ok in zip(ra.ids, twenty & (ra.first_step > 0)) if ok]
first = [i for i, ok in zip(ra.ids, twenty & (ra.first_step == 0)) if ok]

# %%
# NBVAL_CHECK_OUTPUT
for name, tr in (("static", stat), ("continuous", cont)):
    say("7.2.finisher.row", name=name, steps=int(np.median(ab.steps_until_done(tr, queued))),
        wasted=tr.metrics()["wasted_decode_tokens"])
glue("static_queued_steps", int(np.median(ab.steps_until_done(stat, queued))), "{:,}")  # the premise above
its = sorted(set(ab.iterations_computed(cont, first + queued).tolist()))
say("7.2.finisher.chapter")
say("7.2.finisher.engine", its=t("7.2.or").join(map(str, its)))
print(p_queue.reveal(int(np.median(ab.steps_until_done(cont, queued)))))

# %% [markdown]
# The live view steps through a smaller copy (r0 wants 400 tokens); below it, the chapter-scale runs.

# %%
small = dry.run("chapter-7.1-finisher", "continuous", batch_size=32, workload_knobs={"long_output": 400},
                dry_run=True, progress=False)
tw.show(small, k=len(small.steps) - 1, views=("timeline", "waste"))

# %%
fig, ax = plt.subplots(2, 1, figsize=(10, 6.5), layout="constrained")
for a, tr, title in ((ax[0], stat, t("7.2.fig.static_waits")), (ax[1], cont, t("7.2.fig.cont_refills"))):
    plot_timeline(a, tr)
    a.set_xlim(-0.5, 2100)  # the same steps on both, so the two runs line up
    a.set_title(title, fontsize=10)

# %% [markdown]
# No vermillion: nothing is computed for a finished request. Slot 0 (r0) decodes for 2,000 steps while the 31
# other slots serve the queue — the second wave starts the step after the first is done — and then sit idle.
#
# ## 2. The moment a slot changes hands
#
# **Predict.** The first wave's 20-token requests make their last token in step {glue}`first_wave_last_step`. How
# many slots change hands in step 20?

# %%
p_swap = Predict(t("7.2.predict.swap"), unit=t("7.2.unit.slots"), lo=0, hi=32)
p_swap

# %%
# NBVAL_CHECK_OUTPUT
changes = {k: ab.slot_changes(cont, k) for k in range(1, len(cont.steps))}
for k in [k for k, c in changes.items() if c][:4]:
    moves = t("7.2.swap.sep").join(t("7.2.swap.move", s=s, a=a or "-", b=b or t("7.2.swap.idle"))
                                   for s, a, b in changes[k][:3])
    kinds = [w.phase for w in cont.steps[k].works]
    say("7.2.swap.row", k=k, n=len(changes[k]), moves=moves, prefills=kinds.count("prefill"),
        decodes=kinds.count("decode"))
glue("first_wave_last_step", max(int(ra.last_step[ra.ids.index(i)]) for i in first))  # the premise above
print(p_swap.reveal(len(changes[20])))

# %%
fig, ax = plt.subplots(figsize=(9, 4), layout="constrained")
plot_timeline(ax, cont, k=20, max_columns=len(cont.steps))  # one column per step: nothing binned
ax.set_xlim(14.5, 25.5)
for s, a, b in [c for c in changes[20] if c[0] in (1, 11, 21, 31)]:
    ax.annotate(t("7.2.swap.move", s=s, a=a, b=b), (20, s), xytext=(22.3, s), fontsize=8, va="center",
                bbox=dict(boxstyle="round", fc="white", lw=0.4), arrowprops=dict(arrowstyle="->", lw=0.8))
ax.set_title(t("7.2.fig.zoom"), fontsize=10);

# %% [markdown]
# Two facts make the swap cheap. Every decode step is the *same operation* whoever sits in each slot — one
# token per sequence through the same weights. And each sequence keeps its own **KV cache** (the keys and values
# its earlier tokens left in every layer, so new tokens attend to them without recomputing) in its own slot:
# when it leaves, that memory is free for the next one at once.
#
# ## 3. Realistic traffic on a 70B model
#
# `chapter-7.2-longtail` mixes short chat turns with long retrieval-augmented answers (a fifth of the requests,
# with long prompts too), arriving at random. Serve it with dynamic batching (groups of 32, 0.1 s timeout) and
# with continuous batching, on the modeled 70B/H200 clock. Two measures of how busy the GPU is kept:
#
# * **slot-time utilisation**: useful slot-seconds ÷ (slots × the run's duration): how much of the batch's
#   room did work somebody reads;
# * **share of decode capacity**: output tokens per second achieved ÷ what the modeled GPU makes with all 32
#   slots decoding (at this traffic's mean context). This is closer to a GPU's utilisation: tokens made against
#   tokens it could make at that batch.
#
# **Predict.** What share of its decode capacity will continuous batching reach on this traffic?

# %%
p_util = Predict(t("7.2.predict.util"), unit="%", lo=0, hi=100)
p_util

# %%
traffic = get_workload("chapter-7.2-longtail")
policies = {"static": dict(policy="dynamic", timeout=0.1), "continuous": dict(policy="continuous")}


def serve(wl, kw):
    return dry.run(wl, batch_size=32, dry_run=True, progress=False, **kw)


longtail = {name: serve(traffic, kw) for name, kw in policies.items()}
say("7.2.longtail.capacity", n=len(traffic), cap=ab.decode_capacity_tok_s(longtail["continuous"]),
    hw=longtail["static"].hardware)

# %%
# NBVAL_CHECK_OUTPUT
for name, tr in longtail.items():
    m = tr.metrics()
    say("7.2.longtail.row", name=name, util=m["time_utilization"], share=ab.capacity_share(tr),
        p50=m["e2el_ms"]["p50"] / 1e3, p99=m["e2el_ms"]["p99"] / 1e3)
s, c = longtail["static"], longtail["continuous"]
say("7.2.longtail.chapter")
say("7.2.longtail.engine", share_s=ab.capacity_share(s), share_c=ab.capacity_share(c),
    util_s=s.metrics()["time_utilization"], util_c=c.metrics()["time_utilization"],
    p99_s=s.metrics()["e2el_ms"]["p99"] / 1e3, p99_c=c.metrics()["e2el_ms"]["p99"] / 1e3)
print(p_util.reveal(round(100 * ab.capacity_share(c), 1)))

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.2), layout="constrained")
for (name, tr), color in zip(longtail.items(), (PALETTE["accent"], PALETTE["prefill"])):
    e2e = np.sort(ab.e2e_s(tr))
    ax[0].step(e2e, np.arange(1, len(e2e) + 1) / len(e2e), where="post", label=name, color=color)
    ax[1].plot(tr.step_arrays().start_s, ab.useful_slots_per_step(tr), lw=0.8, label=name, color=color)
ax[0].set(xscale="log", xlabel=t("7.2.fig.e2e"), ylabel=t("7.2.fig.done_fraction"), title=t("7.2.fig.latency"))
ax[1].set(xlabel=t("7.2.fig.time"), ylabel=t("7.2.fig.useful_slots"), title=t("7.2.fig.useful_per_step"))
ax[0].legend(fontsize=8, frameon=False);

# %% [markdown]
# ## 4. A load knob: where the claim holds
#
# How much continuous batching gains depends on how much traffic there is. Sweep the arrival rate (dry runs).

# %%
rates = [0.5, 1, 2, 4, 8, 16]
sweep = {name: [serve(get_workload("chapter-7.2-longtail", rate=r), kw) for r in rates] for name, kw in policies.items()}
# what the text under the table says of it: the rates where static scores higher on slot-time utilisation, and
# the share of decode capacity static stalls at under the heaviest load
higher = [r for r, s, c in zip(rates, sweep["static"], sweep["continuous"])
          if s.metrics()["time_utilization"] > c.metrics()["time_utilization"]]
glue("static_higher_from", min(higher), "{:g}")
glue("static_higher_to", max(higher), "{:g}")
_ = glue("static_share_top", ab.capacity_share(sweep["static"][-1]), "{:.0%}")

# %%
# NBVAL_CHECK_OUTPUT
say("7.2.sweep.head")
for i, rate in enumerate(rates):
    s, c = sweep["static"][i], sweep["continuous"][i]
    util = [t.metrics()["time_utilization"] for t in (s, c)]
    cap = [ab.capacity_share(t) for t in (s, c)]
    step = [1e3 * float(np.mean(t.step_arrays().duration_s)) for t in (s, c)]
    p99 = [t.metrics()["e2el_ms"]["p99"] / 1e3 for t in (s, c)]
    print(f"{rate:5.1f}   {util[0]:6.1%} / {util[1]:5.1%}    {cap[0]:6.1%} / {cap[1]:5.1%}     "
          f"{step[0]:5.1f} / {step[1]:4.1f}     {p99[0]:6.1f} / {p99[1]:5.1f}")

# %% [markdown]
# At {glue}`static_higher_from`–{glue}`static_higher_to` requests/s static batching *scores higher* on slot-time
# utilisation. The measure counts time, not tokens: both policies make the same useful tokens, but static's steps
# are slower (they also compute wasted decodes and attend over padded lengths: see the mean step), so each useful
# slot-step lasts longer and adds more "useful slot-seconds". The share of decode capacity counts tokens, so it
# does not invert: equal at light load, where both just keep up with the traffic, then static stalls near
# {glue}`static_share_top` while continuous climbs.

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.2), layout="constrained")
for (name, runs), color in zip(sweep.items(), (PALETTE["accent"], PALETTE["prefill"])):
    ax[0].plot(rates, [100 * ab.capacity_share(t) for t in runs], "o-", color=color, label=name)
    ax[1].plot(rates, [t.metrics()["e2el_ms"]["p99"] / 1e3 for t in runs], "o-", color=color, label=name)
ax[0].set(xscale="log", xlabel=t("7.2.fig.rate"), ylabel=t("7.2.fig.share"), ylim=(0, 100))
ax[1].set(xscale="log", yscale="log", xlabel=t("7.2.fig.rate"), ylabel=t("7.2.fig.p99"))
ax[0].legend(fontsize=8, frameon=False);

# %% [markdown]
# **Try it.** Move the arrival rate, the policy, the batch size: each move re-runs the engine's dry run.
# "Run on the real model" runs 16 of the requests on the tiny GPT (a few seconds; said so under the button).

# %%
tw.Explorer("chapter-7.2-longtail", policy="continuous", views=("latency", "timeline"),
            controls=("policy", "rate", "batch_size", "timeout"), real_knobs={"n": 16})

# %% [markdown]
# ## 5. The same traffic on the real model
#
# Dry runs replay the schedule without the model. Run part of the traffic through the tiny GPT and compare.

# %%
N = len(traffic) if CHAPTER_SCALE else 16
real = engine.run("chapter-7.2-longtail", "continuous", batch_size=32, workload_knobs={"n": N}, progress=False)
replay = dry.run("chapter-7.2-longtail", "continuous", batch_size=32, workload_knobs={"n": N}, dry_run=True,
                 progress=False)

# %%
# NBVAL_CHECK_OUTPUT
say("7.2.real.run", n=N, steps=len(real.steps), tokens=real.metrics()["output_tokens"])
say("7.2.real.same", same=ab.schedule(real) == ab.schedule(replay))

# %% [markdown]
# ## What to remember
#
# * Continuous batching decides the batch at every iteration: a finished sequence leaves its slot at once and a
#   queued one enters; nothing is computed for finished requests.
# * It works because every decode step is the same operation whoever is in it, and each sequence's KV cache is
#   its own, free the moment it leaves.
# * A 20-token request is done after 20 iterations whoever shares the batch.
# * On long-tailed traffic the GPU makes several times more of the tokens it could make, and the slowest requests
#   finish much sooner — once traffic is heavy enough to fill the slots. Measure tokens, not slot-time.
#
# ## Questions
#
# 1. What happens to a slot in the step right after its request produced its last token, under static and
#    under continuous batching?
# 2. Which two properties of decoding make it possible to swap sequences between steps?
# 3. Why is a 20-token request's latency (in iterations) independent of a 2,000-token request in the batch?
# 4. At 1 request/s static batching has the higher slot-time utilisation. Why, and which measure does not
#    invert?
# 5. New requests still need a prefill when they enter. What could that do to the sequences already decoding?
#    (Notebook 7.3.)
