# %% [markdown]
# # 7.1 Static batching and the fastest finisher
#
# **What you will see.** The batching everyone writes first: gather requests into a group, compute their
# prompts together, then decode until *every* member is done. You will watch it waste work twice — on padding,
# and on slots whose request has already finished — and see what a timeout does and does not change.
#
# Words used below. A **slot** is one place in the batch: one sequence per slot. **Prefill** computes a
# request's whole prompt in one step; **decode** then makes one new token per step. Counts (tokens, steps) come
# from the real tiny GPT or its step-for-step replay; times are *modeled* for a 70B-class model on one NVIDIA
# H200 (notebook 7.0), so every number here is the same on every machine.

# %%
import numpy as np
import matplotlib.pyplot as plt

import tinyserve
tinyserve.set_language("en")
import tinyserve_widgets as tw
from tinyserve.analysis import batching as ab
from tinyserve.core.workloads import get_workload
from tinyserve.cost.clock import ModeledClock
from tinyserve.engine import Engine
from tinyserve.lang import say, t, width
from tinyserve.lang.glue import glue
from tinyserve_widgets.palette import HATCH, PALETTE
from tinyserve_widgets.predict import Predict
from tinyserve_widgets.static import plot_timeline

# ▶ CHAPTER_SCALE: False runs the fastest-finisher scenario on the real model with a 400-token long answer
#   (seconds); True runs the chapter's 2,000 tokens on the real model too (about 4× longer).
#   Checked numbers always come from the chapter-scale scenario, replayed without the model (a "dry run").
CHAPTER_SCALE = False

engine = tinyserve.shared_engine()
dry = Engine()  # dry runs: the same scheduler and cost model, no forward passes (lengths are known)
clock = ModeledClock()  # the default preset: 70B-class, FP8, one H200
print(clock.hardware.description)

# %% [markdown]
# ## 1. Padding
#
# A static group computes its prompts as one rectangle: each prompt is padded to the longest, and the padding
# runs through every layer like real tokens. `chapter-7.1-padding` sends a 50-token and a 4,000-token prompt
# together.
#
# **Predict.** How many prompt tokens will the engine compute on behalf of the 50-token request?

# %%
p_pad = Predict(t("7.1.predict.padding"), unit=t("7.1.unit.tokens"), lo=0, hi=1e6)
p_pad

# %%
padded = engine.run("chapter-7.1-padding", "static", batch_size=2, progress=False)  # real model
short, long_ = sorted(padded.requests, key=lambda r: r.prompt_len)

# %%
# NBVAL_CHECK_OUTPUT
say("7.1.padding_row", prompt=short.prompt_len, computed=short.prefill_computed_tokens,
    padding=short.prefill_computed_tokens - short.prompt_len)
say("7.1.padding_chapter")
say("7.1.padding_engine", ratio=short.prefill_computed_tokens / short.prompt_len)
glue("padding_x", short.prefill_computed_tokens / short.prompt_len, "{:.0f}")
print(p_pad.reveal(short.prefill_computed_tokens))
alone_ms, padded_ms = 1e3 * clock.prefill_time(short.prompt_len), 1e3 * padded.steps[0].duration_s
say("7.1.padding_modeled", alone=alone_ms, padded=padded_ms)

# %%
fig, ax = plt.subplots(figsize=(8, 1.8), layout="constrained")
for i, r in enumerate((short, long_)):
    ax.barh(i, r.prompt_len, color=PALETTE["prefill"], label=t("7.1.legend.own_prompt") if i == 0 else None)
    ax.barh(i, r.prefill_computed_tokens - r.prompt_len, left=r.prompt_len, color=PALETTE["padding"],
            hatch=HATCH["padding"], edgecolor="#8a7d00", lw=0, label=t("7.1.legend.padding") if i == 0 else None)
ax.set(yticks=[0, 1], yticklabels=[t("7.1.prompt_tick", n=short.prompt_len), t("7.1.prompt_tick", n=long_.prompt_len)],
       xlabel=t("7.1.x_padding"))
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)  # words: ok (a location)
ax.set_title(t("7.1.title_padding"), fontsize=10);

# %% [markdown]
# ## 2. The fastest finisher
#
# `chapter-7.1-finisher` sends 63 requests at once to 32 slots: one wants a 2,000-token answer, the others 20
# tokens. The first group of 32 ends only when its *last* member is done. A finished member's slot cannot be
# handed to anybody, so it keeps computing decode tokens that are thrown away (**wasted**).
#
# **Predict.** Slot 7 holds a 20-token request in the first group. How many of its decode steps are wasted?

# %%
p_slot7 = Predict(t("7.1.predict.slot7"), unit=t("7.1.unit.steps"), lo=0, hi=1e5)
p_slot7

# %%
LONG = 2000 if CHAPTER_SCALE else 400
scaled = {"long_output": LONG}
real = engine.run("chapter-7.1-finisher", "static", batch_size=32, workload_knobs=scaled, progress=False)  # model
replay = dry.run("chapter-7.1-finisher", "static", batch_size=32, workload_knobs=scaled, dry_run=True,
                 progress=False)  # the same requests, no model


# %%
# NBVAL_CHECK_OUTPUT
say("7.1.real_run", long=LONG, steps=len(real.steps), wasted=real.metrics()["wasted_decode_tokens"])
say("7.1.dry_same", same=ab.schedule(real) == ab.schedule(replay))

# %% [markdown]
# The replay agrees step for step with the real model, so the chapter-scale numbers below come from dry runs.

# %%
static = dry.run("chapter-7.1-finisher", "static", batch_size=32, dry_run=True, progress=False)
grid = static.slot_phases()
ra = static.request_arrays()
group_steps = int(ra.last_step[ra.ids.index("r0")]) + 1  # the first group ends with r0, the long answer
shorts = [r for r in static.requests if r.id != "r0" and 0 <= r.slot and ra.first_step[ra.ids.index(r.id)] == 0]
slot7 = grid[7, :group_steps]

# %%
# NBVAL_CHECK_OUTPUT
n_dec = int(np.sum(slot7 != "prefill"))
n_wasted = int(np.sum(slot7 == "wasted"))
say("7.1.group_steps", steps=group_steps, decodes=group_steps - 1)
say("7.1.slot7", decodes=n_dec, useful=n_dec - n_wasted, wasted=n_wasted)
print(p_slot7.reveal(n_wasted))
wasted_shares = [float(np.mean(grid[r.slot, 1:group_steps] == "wasted")) for r in shorts]
say("7.1.finisher_chapter")
glue("finisher_slots", len(shorts))
glue("finisher_waste", min(wasted_shares), "{:.0%}")
say("7.1.finisher_engine", slots=len(shorts), share=min(wasted_shares))

# %% [markdown]
# Step through the real-model run (long answer of `LONG` tokens) with the cursor: every slot's phase, and the
# meter of useful, padding, wasted and idle slot-steps so far. Below it, the chapter-scale run as a picture.

# %%
tw.show(real, k=len(real.steps) - 1, views=("timeline", "waste"))

# %%
fig, ax = plt.subplots(figsize=(10, 4.2), layout="constrained")
plot_timeline(ax, static)
ax.set_title(t("7.1.title_timeline"), fontsize=10);

# %% [markdown]
# Vermillion is work thrown away; the thin green stripes at the left are the useful steps of the short requests,
# the long green line the request everyone waits for. The second group (far right) starts only after it.
#
# ## 3. Throughput looks fine; the tail does not
#
# Two latencies: **TTFT** (time to first token) runs from a request's arrival to its first token; the
# **end-to-end** latency to its last. Over many requests, **p50** is the median (half finish sooner) and **p99**
# the value only 1 in 100 exceeds: the tail. A 20-token request of the second group waited for all of r0:

# %%
# NBVAL_CHECK_OUTPUT
second = [r.id for r in static.requests if r.admitted_s and r.admitted_s > 0]
say("7.1.first_group_done", s=np.median(ab.e2e_s(static, [r.id for r in shorts])))
say("7.1.second_group_done", s=np.median(ab.e2e_s(static, second)))

# %% [markdown]
# Now realistic traffic: `chapter-7.2-longtail` mixes short chat turns with long retrieval-augmented answers,
# arriving at random, here 0.5 requests per second. Serve it with groups that start after at most 0.5 s of
# waiting (the dynamic batching of section 4), and compare the throughput with what the traffic asks for.

# %%
traffic = get_workload("chapter-7.2-longtail", rate=0.5)
served = dry.run(traffic, "dynamic", batch_size=32, timeout=0.5, dry_run=True, progress=False)
m = served.metrics()
asked = sum(r.max_new_tokens for r in traffic) / max(r.arrival_s for r in traffic)
rs = served.request_arrays()
longest = ab.group_longest_output(served)  # the longest answer in each request's group
e2e = ab.e2e_s(served, rs.ids)
with_long = e2e[(rs.output_len <= 50) & (longest >= 300)]
without = e2e[(rs.output_len <= 50) & (longest < 300)]

# %%
# NBVAL_CHECK_OUTPUT
say("7.1.throughput", asked=asked, delivered=m["output_throughput"])
say("7.1.e2e", p50=m["e2el_ms"]["p50"] / 1e3, p99=m["e2el_ms"]["p99"] / 1e3)
say("7.1.tail_chapter")
say("7.1.tail_engine", with_long=np.median(with_long), without=np.median(without))

# %%
fig, ax = plt.subplots(figsize=(8, 3.4), layout="constrained")
sc = ax.scatter(rs.output_len, e2e, c=longest, cmap="viridis", s=18)
fig.colorbar(sc, ax=ax, label=t("7.1.colorbar_longest"))
ax.set(xscale="log", xlabel=t("7.1.x_own_length"), ylabel=t("7.1.y_e2e"), title=t("7.1.title_scatter"));

# %% [markdown]
# Averaged over the run the server keeps up; per request it does not: a 20-token answer's latency is set by the
# longest answer in its group (yellow dots high on the left).
#
# ## 4. Dynamic batching: a timeout for waiting, not for waste
#
# Waiting for a *full* group of 32 leaves early arrivals waiting. **Dynamic batching** starts the group when
# it is full *or* when its oldest request has waited `timeout` seconds; latecomers join the pending group until
# then. The chapter's timeout may vary with the load; ours is a fixed number of seconds.
#
# **Predict.** Full groups throw away about {glue}`full_waste` of the decode work. What share will a 0.5 s
# timeout still throw away?

# %%
p_waste = Predict(t("7.1.predict.waste"), unit="%", lo=0, hi=100)
p_waste

# %%
TIMEOUTS = (4.0, 2.0, 1.0, 0.5, 0.1)


def timeout_runs(rate):
    """Full groups (key None), then dynamic batching with each timeout (key: the timeout in s)."""
    wl = get_workload("chapter-7.2-longtail", rate=rate)
    runs = {None: dry.run(wl, "static", batch_size=32, dry_run=True, progress=False)}
    for timeout in TIMEOUTS:
        runs[timeout] = dry.run(wl, "dynamic", batch_size=32, timeout=timeout, dry_run=True, progress=False)
    return runs


def run_name(timeout):
    """A run's label in the table and the chart."""
    return t("7.1.full_groups") if timeout is None else t("7.1.timeout_name", timeout=timeout)


runs = timeout_runs(0.5)

# %%
# NBVAL_CHECK_OUTPUT
say("7.1.wait_note")
say("7.1.table_head")
for timeout, tr in runs.items():
    name = run_name(timeout)
    print(f"{name}{' ' * (16 - width(name))} {ab.queue_wait_s(tr):10.2f}s "  # padded by display width
          f"{tr.metrics()['e2el_ms']['p99'] / 1e3:7.1f}s {ab.wasted_share(tr):18.1%}")
full, quick = runs[None], runs[0.5]
say("7.1.timeout_chapter")
say("7.1.timeout_engine", full_wait=ab.queue_wait_s(full), quick_wait=ab.queue_wait_s(quick),
    full_waste=ab.wasted_share(full), quick_waste=ab.wasted_share(quick))
glue("full_waste", ab.wasted_share(full), "{:.0%}")  # the premise of the prediction above
print(p_waste.reveal(round(100 * ab.wasted_share(quick), 1)))

# %% [markdown]
# From 4 s down to 0.1 s, the timeout barely moves the wait. Our server runs **one group at a time**: at this
# load a group decodes for several seconds (it usually holds a long answer), so a new request mostly waits for
# *the group ahead to finish*, not for its own timeout. The timeout only matters when the server is idle when
# requests arrive. At a fifth of the load it is:

# %%
# NBVAL_CHECK_OUTPUT
light = timeout_runs(0.1)
say("7.1.light_head", timeouts=" / ".join(f"{timeout:g}" for timeout in TIMEOUTS))
for rate, rr in ((0.5, runs), (0.1, light)):
    say("7.1.light_row", rate=rate, waits=" / ".join(f"{ab.queue_wait_s(rr[timeout]):.2f}" for timeout in TIMEOUTS))

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3), layout="constrained")
for rate, rr, color in ((0.5, runs, PALETTE["prefill"]), (0.1, light, PALETTE["accent"])):
    ax[0].plot(TIMEOUTS, [ab.queue_wait_s(rr[timeout]) for timeout in TIMEOUTS], "o-", color=color,
               label=t("7.1.rate", rate=rate))
ax[0].set(xscale="log", xlabel=t("7.1.x_timeout"), ylabel=t("7.1.y_wait"), title=t("7.1.title_wait"))
ax[0].legend(fontsize=8, frameon=False)
ax[1].barh([run_name(k) for k in runs], [100 * ab.wasted_share(tr) for tr in runs.values()],
           color=PALETTE["wasted"], hatch=HATCH["wasted"], edgecolor="white", lw=0)
ax[1].set(xlabel=t("7.1.x_waste"), title=t("7.1.title_waste"));

# %% [markdown]
# The timeout decides when a group *starts*. Smaller groups waste a little less, but each still decodes until
# its slowest member is done and seats nobody new meanwhile. Notebook 7.2 fixes that.
#
# **Try it.** Static or dynamic, batch size, timeout, arrival rate, on 100 requests of this traffic: each move
# re-runs the engine's dry run (modeled clock). "Run on the real model" runs 12 of them on the tiny GPT (a few
# seconds; said so under the button).

# %%
tw.Explorer("chapter-7.2-longtail", policy="dynamic", timeout=0.5, rate=0.5, policies=("static", "dynamic"),
            views=("timeline", "waste"), controls=("policy", "batch_size", "timeout", "rate"),
            workload_knobs={"n": 100}, real_knobs={"n": 12}, k=-1)

# %% [markdown]
# ## What to remember
#
# * Static batching pads every prompt in a group to the longest: a 50-token prompt beside a 4,000-token one pays
#   for {glue}`padding_x`× its own prefill.
# * A group decodes until its slowest member is done: with one 2,000-token answer among 20-token ones,
#   {glue}`finisher_slots` of 32 slots spend {glue}`finisher_waste` of their decode steps on discarded tokens.
# * Throughput can match the traffic while p99 latency is set by the longest answer that shared the group.
# * A timeout shortens the wait only when the server is idle; the waste inside a group stays.
#
# ## Questions
#
# 1. Why does padding cost real computation rather than just memory?
# 2. In the finisher run, what decides when the first group's slots become free?
# 3. Why can average throughput look acceptable while p99 latency is terrible?
# 4. At 0.5 requests/s, why does a 0.1 s timeout give about the same wait as a 4 s one?
# 5. What would a scheduler need to be able to do to avoid the vermillion area in the slot timeline?
