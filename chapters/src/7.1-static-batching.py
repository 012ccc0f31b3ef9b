# %% [markdown]
# # 7.1 Static batching and the fastest finisher
#
# **What you will see in this notebook**
#
# 1. The simplest batching anyone writes: collect requests into a group, run the group's prompts together
#    (padded to the longest), then decode until *every* member is done.
# 2. **Padding**: a short prompt grouped with a long one pays for the long one's prefill (F2).
# 3. **The fastest finisher**: one long answer keeps 31 finished requests' slots computing tokens nobody will
#    read (F3), and the requests queued behind the group wait for it (F4).
# 4. **Dynamic batching**: a timeout shortens the wait to *start* a group, but not the waste once it runs (F5).
#
# The runs use the real tiny GPT. Counts (tokens, steps, slots) are the same on every machine; times are
# *modeled* for a 70B-class model on an NVIDIA H200 (see 7.0), so they are the same everywhere too.

# %%

import numpy as np
import matplotlib.pyplot as plt

import tinyserve
from tinyserve.clock import ModeledClock
from tinyserve.engine import Engine
from tinyserve_widgets.static import plot_timeline
from tinyserve_widgets.predict import Predict


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
# A static batch computes its prompts as one rectangle: every prompt is padded to the longest one in the
# group, and the padding goes through every layer like real tokens. The workload `chapter-7.1-padding` holds
# a 50-token prompt and a 4,000-token prompt that arrive together.
#
# **Predict.** How many prompt tokens will the engine compute on behalf of the 50-token request?

# %%
p_pad = Predict("How many prompt tokens will the engine compute for the 50-token request?", unit="tokens", lo=0)
p_pad

# %%
padded = engine.run("chapter-7.1-padding", "static", batch_size=2, progress=False)  # real model
short, long_ = sorted(padded.requests, key=lambda r: r.prompt_len)

# %%
# NBVAL_CHECK_OUTPUT
print(f"short prompt: {short.prompt_len} tokens, computed {short.prefill_computed_tokens} prefill tokens "
      f"({short.prefill_computed_tokens - short.prompt_len} of them padding)")
print(f"F2: the short prompt computed {short.prefill_computed_tokens / short.prompt_len:.1f}× its own prefill")
print(f"padding tokens in the run: {padded.metrics()['padding_tokens']}")
print(p_pad.reveal(short.prefill_computed_tokens))
alone_ms, padded_ms = 1e3 * clock.prefill_time(short.prompt_len), 1e3 * padded.steps[0].duration_s
print(f"modeled: its prefill alone would take {alone_ms:.1f} ms; the padded batch's prefill step took {padded_ms:.1f} ms")

# %%
fig, ax = plt.subplots(figsize=(7, 1.8))
for i, r in enumerate((short, long_)):
    ax.barh(i, r.prompt_len, color="#4c78a8", label="own prompt" if i == 0 else None)
    ax.barh(i, r.prefill_computed_tokens - r.prompt_len, left=r.prompt_len, color="#bab0ac",
            label="padding" if i == 0 else None)
ax.set(yticks=[0, 1], yticklabels=[f"{short.prompt_len}-token prompt", f"{long_.prompt_len}-token prompt"],
       xlabel="prompt tokens computed in the batch's prefill")
ax.legend(loc="lower right", fontsize=8)
ax.set_title("padding: the short prompt is computed as if it were as long as the longest", fontsize=10);

# %% [markdown]
# The padding is real work: 3,950 positions that run through the whole network and are then thrown away. On
# a GPU the long prompt's prefill is compute-bound, so the padded rows cost nearly as much as real ones.

# %% [markdown]
# ## 2. The fastest finisher
#
# The workload `chapter-7.1-finisher` sends 63 requests at once to an engine with 32 slots: one request wants
# a 2,000-token answer, all the others want 20 tokens. Static batching takes the first 32 as a group. The
# group ends only when its *last* member is done, and the engine cannot hand a finished member's slot to
# anybody: the slot keeps running decode steps whose tokens are discarded (marked **wasted**).
#
# **Predict.** Slot 7 holds a 20-token request in the first group. Of the decode steps its slot runs before the
# group ends, how many are wasted?

# %%
p_slot7 = Predict("How many of slot 7's decode steps are wasted?", unit="steps", lo=0)
p_slot7

# %%
from tinyserve.workloads import get_workload

LONG = 2000 if CHAPTER_SCALE else 400

real = engine.run(get_workload("chapter-7.1-finisher", long_output=LONG), "static", batch_size=32,
                  progress=False)  # the real model
replay = dry.run(get_workload("chapter-7.1-finisher", long_output=LONG), "static", batch_size=32,
                 dry_run=True, progress=False)  # the same requests, no model


def composition(trace):
    return [[(w.slot, w.request_id, w.phase, w.tokens, w.padding) for w in s.works] for s in trace.steps]

# %%
# NBVAL_CHECK_OUTPUT
print(f"real model, long answer {LONG} tokens: {len(real.steps)} steps, "
      f"{real.metrics()['wasted_decode_tokens']} wasted decode tokens")
print(f"the dry run computes the very same steps: {composition(real) == composition(replay)}")

# %% [markdown]
# The dry run agrees step for step with the real model, so from here on the chapter-scale numbers come from
# dry runs (milliseconds instead of seconds).

# %%
finisher = get_workload("chapter-7.1-finisher")  # 63 requests for 32 slots: 31 of them queue
static = dry.run(finisher, "static", batch_size=32, dry_run=True, progress=False)
grid = static.slot_phases()
first_group = [r for r in static.requests if r.slot >= 0 and r.admitted_s == 0.0]
group_steps = max(i for i, s in enumerate(static.steps) if any(w.request_id == "r0" for w in s.works)) + 1
slot7 = grid[7, :group_steps]

# %%
# NBVAL_CHECK_OUTPUT
n_dec = int(np.sum(slot7 != "prefill"))
n_wasted = int(np.sum(slot7 == "wasted"))
print(f"the first group runs {group_steps} steps: 1 prefill + {group_steps - 1} decode steps")
print(f"slot 7: {n_dec} decode steps, {n_dec - n_wasted} useful, {n_wasted} wasted")
print(p_slot7.reveal(n_wasted))
shorts = [r for r in first_group if r.id != "r0"]
wasted_shares = [float(np.mean(grid[r.slot, 1:group_steps] == "wasted")) for r in shorts]
print(f"F3: {len(shorts)} of the 32 slots spend {min(wasted_shares):.1%} of their decode steps making tokens "
      f"that are thrown away")
print(f"wasted decode tokens in the first group: {sum(int(np.sum(grid[r.slot, :group_steps] == 'wasted')) for r in shorts):,}")

# %% [markdown]
# Step through the real-model run of section 2 (long answer of `LONG` tokens) with the cursor (press ▶ or
# drag): the timeline shows every slot's phase, the meter counts useful, padded, wasted and idle slot-steps so
# far. The static picture below it shows the chapter-scale run (2,000 tokens).

# %%
import tinyserve_widgets as tw

tw.show(real, k=len(real.steps) - 1, views=("timeline", "waste"))

# %%
fig, ax = plt.subplots(figsize=(10, 4.2))
plot_timeline(ax, static)
ax.set_title("static, B=32: 63 requests (r0 wants 2,000 tokens, the rest 20)", fontsize=10);

# %% [markdown]
# Red is work thrown away. The thin green stripes at the left are the 20 useful steps of each short request;
# the single long green line is the request everyone waits for. The second group (far right) only starts when
# the long request is done.

# %% [markdown]
# ## 3. Throughput looks fine; the tail does not
#
# In the finisher run, a 20-token request that landed in the second group waited for the whole of the long
# request before its own prefill started:

# %%
def e2e_s(r):
    return r.finish_s - r.arrival_s


second = [r for r in static.requests if r.admitted_s and r.admitted_s > 0]

# %%
# NBVAL_CHECK_OUTPUT
print(f"20-token requests in the first group: done after {np.median([e2e_s(r) for r in shorts]):.2f} s (modeled)")
print(f"20-token requests queued for the second group: done after {np.median([e2e_s(r) for r in second]):.2f} s")

# %% [markdown]
# That is an extreme case. Now take realistic traffic: `chapter-7.2-longtail` mixes short chat turns with long
# retrieval-augmented answers, arriving at random, here at 0.5 requests per second. Serve it with static
# batching that starts a group after at most 0.5 s of waiting (the dynamic batching of section 4), and compare
# the throughput the server reaches with the throughput the traffic asks for.

# %%
from collections import defaultdict

traffic = get_workload("chapter-7.2-longtail", rate=0.5)
served = dry.run(traffic, "dynamic", batch_size=32, timeout=0.5, dry_run=True, progress=False)
m = served.metrics()
asked = sum(r.max_new_tokens for r in traffic) / max(r.arrival_s for r in traffic)
groups = defaultdict(list)  # a static group = the requests admitted in the same step
for r in served.requests:
    groups[r.admitted_s].append(r)
group_longest = {r.id: max(x.output_len for x in groups[r.admitted_s]) for r in served.requests}
short_with_long = [e2e_s(r) for r in served.requests if r.output_len <= 50 and group_longest[r.id] >= 300]
short_without = [e2e_s(r) for r in served.requests if r.output_len <= 50 and group_longest[r.id] < 300]

# %%
# NBVAL_CHECK_OUTPUT
print(f"traffic asks for {asked:.1f} output tokens/s; the server delivers {m['output_throughput']:.1f} tokens/s")
print(f"latency p50 {m['e2el_ms']['p50'] / 1e3:.1f} s, p99 {m['e2el_ms']['p99'] / 1e3:.1f} s (modeled)")
print(f"F4: short answers (<= 50 tokens) grouped with a >= 300-token answer: p50 {np.median(short_with_long):.1f} s; "
      f"grouped without one: p50 {np.median(short_without):.1f} s")

# %%
fig, ax = plt.subplots(figsize=(8, 3.4))
lens = np.array([r.output_len for r in served.requests])
e2e = np.array([e2e_s(r) for r in served.requests])
longest = np.array([group_longest[r.id] for r in served.requests])
sc = ax.scatter(lens, e2e, c=longest, cmap="viridis", s=18)
fig.colorbar(sc, ax=ax, label="longest answer in its group (tokens)")
ax.set(xscale="log", xlabel="the request's own answer length (tokens)", ylabel="end-to-end latency (s, modeled)",
       title="static groups: a short answer's latency depends on who it was grouped with");

# %% [markdown]
# On average the server keeps up with the traffic, so a throughput dashboard looks healthy. Per request it
# does not: a 20-token answer's latency is set less by its own length than by the longest answer that
# happened to share its group (the yellow dots high up on the left).

# %% [markdown]
# ## 4. Dynamic batching: a timeout for waiting, not for waste
#
# A static server that waits for a *full* group of 32 leaves early arrivals waiting when traffic is light.
# **Dynamic batching** starts the group when it is full *or* when its oldest request has waited `timeout`
# seconds (latecomers join the pending group until then). Same traffic, several timeouts.
#
# **Predict.** Waiting for full groups throws away about three quarters of the decode work. What share will
# a 0.5 s timeout still throw away?

# %%
p_waste = Predict("What share of the decode work will a 0.5 s timeout still throw away?", unit="%", lo=0, hi=100)
p_waste

# %%
def queue_wait_s(trace):
    return float(np.mean([r.admitted_s - r.arrival_s for r in trace.requests if r.admitted_s is not None]))


def wasted_share(mm):
    return mm["wasted_decode_tokens"] / (mm["decode_tokens"] + mm["wasted_decode_tokens"])


runs = {"static (full group)": dry.run(traffic, "static", batch_size=32, dry_run=True, progress=False)}
for t in (4.0, 2.0, 1.0, 0.5, 0.1):
    runs[f"dynamic, timeout {t} s"] = dry.run(traffic, "dynamic", batch_size=32, timeout=t, dry_run=True, progress=False)

# %%
# NBVAL_CHECK_OUTPUT
print(f"{'policy':24s} {'mean wait':>10s} {'p99 e2e':>9s} {'wasted decode work':>19s}")
for name, tr in runs.items():
    mm = tr.metrics()
    print(f"{name:24s} {queue_wait_s(tr):9.2f}s {mm['e2el_ms']['p99'] / 1e3:8.1f}s {wasted_share(mm):18.1%}")
full, quick = runs["static (full group)"], runs["dynamic, timeout 0.5 s"]
print(f"F5: a 0.5 s timeout cuts the mean wait from {queue_wait_s(full):.1f} s to {queue_wait_s(quick):.1f} s, "
      f"yet {wasted_share(quick.metrics()):.0%} of the decode work is still thrown away "
      f"(full groups: {wasted_share(full.metrics()):.0%})")
print(p_waste.reveal(round(100 * wasted_share(quick.metrics()), 1)))

# %%
names = list(runs)
fig, ax = plt.subplots(1, 2, figsize=(10, 3))
ax[0].barh(names, [queue_wait_s(runs[n]) for n in names], color="C0")
ax[0].set(xlabel="mean wait before the group starts (s)", title="waiting: the timeout helps")
ax[1].barh(names, [100 * wasted_share(runs[n].metrics()) for n in names], color="#e15759")
ax[1].set(xlabel="wasted share of decode work (%)", title="waste: still there", yticklabels=[])
plt.tight_layout()

# %% [markdown]
# The timeout decides when a group *starts*. Groups get smaller, so a little less is wasted, but every group
# still decodes until its slowest member is done and still cannot seat anyone new meanwhile. Fixing that needs
# a scheduler that lets a finished request go and seats a waiting one *during* decoding — notebook 7.2.

# %% [markdown]
# ## What to remember
#
# * Static batching pads every prompt in a group to the longest: a 50-token prompt with a 4,000-token one pays
#   for 80× its own prefill (**F2**).
# * A group decodes until its slowest member is done; with one 2,000-token answer among 20-token ones, 31 of 32
#   slots spend 99% of their steps on discarded tokens (**F3**).
# * Throughput averaged over the run can match what the traffic asks for while per-request latency is set by
#   the longest answer that happened to share the group (**F4**).
# * Dynamic batching's timeout shortens the wait for a group to start, but the waste inside the group stays
#   (**F5**).
#
# ## Questions
#
# 1. Why does padding cost real computation rather than just memory?
# 2. In the finisher run, what decides when the first group's slots become free?
# 3. Why can average throughput look acceptable while p99 latency is terrible?
# 4. What does dynamic batching's timeout change, and what does it leave as it was?
# 5. What would a scheduler need to be able to do to avoid the red area in the slot timeline?
