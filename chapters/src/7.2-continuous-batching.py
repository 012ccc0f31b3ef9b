# %% [markdown]
# # 7.2 Continuous batching: scheduling each iteration
#
# **What you will see in this notebook**
#
# 1. The fastest-finisher workload of 7.1 again, now with a scheduler that re-decides the batch after *every*
#    step: a finished request leaves its slot at once and a waiting one takes it.
# 2. The moment a slot changes hands, step by step.
# 3. A 20-token request finishing after about 20 iterations no matter who else is running (F6).
# 4. Realistic long-tailed traffic on a modeled 70B model: how busy the GPU is kept and what happens to the
#    slowest requests (F7), with a load knob that shows where the effect is large and where it is not.
#
# This way of scheduling is what Orca called *iteration-level scheduling*; NVIDIA calls it *in-flight
# batching*; vLLM and TGI are built around it.

# %%

import numpy as np
import matplotlib.pyplot as plt

import tinyserve
from tinyserve.engine import Engine
from tinyserve.workloads import get_workload
from tinyserve_widgets.static import plot_timeline
from tinyserve_widgets.predict import Predict


# ▶ CHAPTER_SCALE: False runs 16 requests of the long-tail traffic on the real model (seconds);
#   True runs all of them. Checked numbers come from dry runs of the full workloads either way.
CHAPTER_SCALE = False

engine = tinyserve.shared_engine()
dry = Engine()  # dry runs: same scheduler and cost model, no forward passes

# %% [markdown]
# ## 1. The fastest finisher, continuously
#
# Same 63 requests as in 7.1 (r0 wants 2,000 tokens, the other 62 want 20), same 32 slots. The only change is
# the policy: `continuous`.
#
# **Predict.** In 7.1, a 20-token request queued behind the first group finished after about 2,020 steps. How
# many steps will it take now?

# %%
p_queue = Predict("How many steps after arriving is a queued 20-token request done?", unit="steps", lo=0)
p_queue

# %%
finisher = get_workload("chapter-7.1-finisher")
cont = dry.run(finisher, "continuous", batch_size=32, dry_run=True, progress=False)
stat = dry.run(finisher, "static", batch_size=32, dry_run=True, progress=False)


def step_of(trace, t):
    """Index of the step that ended at time t."""
    return next(s.index for s in trace.steps if abs(s.start_s + s.duration_s - t) < 1e-12)


def steps_from_arrival(trace, r):
    return step_of(trace, r.finish_s) + 1


def iterations_computed(trace, r):
    return sum(1 for s in trace.steps for w in s.works if w.request_id == r.id)

# %%
# NBVAL_CHECK_OUTPUT
queued = [r for r in cont.requests if r.max_new_tokens == 20 and r.admitted_s > 0]
in_first = [r for r in cont.requests if r.max_new_tokens == 20 and r.admitted_s == 0]
for name, tr in (("static", stat), ("continuous", cont)):
    q = [tr.request(r.id) for r in queued]
    print(f"{name:10s}: a queued 20-token request is done {int(np.median([steps_from_arrival(tr, r) for r in q]))} "
          f"steps after it arrived; wasted decode tokens: {tr.metrics()['wasted_decode_tokens']:,}")
its = {iterations_computed(cont, r) for r in in_first + queued}
print(f"F6: under continuous batching every 20-token request is computed in exactly "
      f"{' or '.join(map(str, sorted(its)))} iterations (1 prefill + 19 decodes), beside r0's 2,000 or not")
print(p_queue.reveal(int(np.median([steps_from_arrival(cont, r) for r in queued]))))

# %% [markdown]
# The live view steps through a smaller copy (r0 wants 400 tokens); below it, the chapter-scale static and
# continuous runs side by side as pictures.

# %%
import tinyserve_widgets as tw

small = dry.run(get_workload("chapter-7.1-finisher", long_output=400), "continuous", batch_size=32,
                dry_run=True, progress=False)
tw.show(small, k=len(small.steps) - 1, views=("timeline", "waste"))

# %%
fig, ax = plt.subplots(2, 1, figsize=(10, 6.5))
for a, tr, title in ((ax[0], stat, "static: the second group waits for r0"),
                     (ax[1], cont, "continuous: freed slots are refilled at once")):
    plot_timeline(a, tr)
    a.set_xlim(-0.5, 2100)  # the same steps on both, so the two runs line up
    a.set_title(title, fontsize=10)
plt.tight_layout()

# %% [markdown]
# No red: nothing is computed for a finished request. Slot 0 (r0) decodes for 2,000 steps, and the 31 other
# slots serve the queue in the meantime — the second wave of 20-token requests starts the step after the first
# wave is done, not 2,000 steps later — and then sit idle, because nobody is left to serve.

# %% [markdown]
# ## 2. The moment a slot changes hands
#
# Step the same run by hand and print only the steps where somebody leaves or enters.

# %%
run = dry.start(finisher, "continuous", batch_size=32, dry_run=True)
before = {}

# %%
# NBVAL_CHECK_OUTPUT
shown = 0
while not run.done and shown < 4:
    st = run.step()
    if st is None:
        continue
    now = {w.slot: w.request_id for w in st.works}
    changed = sorted(s for s in now if before.get(s) != now[s])
    if changed and st.index > 0:
        moves = ", ".join(f"slot {s}: {before.get(s, '-')} → {now[s]}" for s in changed[:3])
        print(f"step {st.index}: {len(changed)} slots change hands ({moves}, …); "
              f"this step: {sum(w.phase == 'prefill' for w in st.works)} prefills, "
              f"{sum(w.phase == 'decode' for w in st.works)} decodes")
        shown += 1
    before = now

# %% [markdown]
# Two facts make this cheap. Every decode step is the *same operation* whatever sits in each slot — a token
# per sequence through the same weights — so swapping one sequence for another needs no new kind of step.
# And each sequence keeps its own KV cache in its own slot, so when it leaves, its memory is free for the next
# one immediately.

# %% [markdown]
# ## 3. Realistic traffic on a 70B model
#
# `chapter-7.2-longtail` is a mix of short chat turns (most requests) and long retrieval-augmented answers (a
# fifth of them, with long prompts too), arriving at random. Output lengths are long-tailed. Run it under
# static batching (groups of 32, launched after a 0.1 s wait — dynamic batching) and under continuous batching,
# on the modeled 70B/H200 clock.
#
# **Utilisation** here is the share of the slots' time spent computing tokens somebody will read: useful
# slot-seconds ÷ (slots × the run's duration). Idle slots, padding, wasted decodes and idle gaps between
# arrivals all count against it.
#
# **Predict.** What utilisation will continuous batching reach on this traffic?

# %%
p_util = Predict("Continuous batching's utilisation on this traffic?", unit="%", lo=0, hi=100)
p_util

# %%
traffic = get_workload("chapter-7.2-longtail")
policies = {"static": dict(policy="dynamic", timeout=0.1), "continuous": dict(policy="continuous")}
longtail = {name: dry.run(traffic, kw["policy"], batch_size=32, dry_run=True, progress=False,
                          **{k: v for k, v in kw.items() if k != "policy"}) for name, kw in policies.items()}

# %%
# NBVAL_CHECK_OUTPUT
print(f"{len(traffic)} requests; modeled clock: {longtail['static'].hardware}")
for name, tr in longtail.items():
    m = tr.metrics()
    print(f"{name:10s}: utilisation {m['time_utilization']:5.1%}, output {m['output_throughput']:6.0f} tok/s, "
          f"e2e p50 {m['e2el_ms']['p50'] / 1e3:5.1f} s, p99 {m['e2el_ms']['p99'] / 1e3:5.1f} s, "
          f"TTFT p99 {m['ttft_ms']['p99'] / 1e3:5.2f} s")
s, c = (longtail[k].metrics() for k in ("static", "continuous"))
print(f"F7: utilisation {s['time_utilization']:.0%} -> {c['time_utilization']:.0%}; "
      f"p99 latency {s['e2el_ms']['p99'] / 1e3:.1f} s -> {c['e2el_ms']['p99'] / 1e3:.1f} s")
print(p_util.reveal(round(100 * c["time_utilization"], 1)))

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
for name, tr in longtail.items():
    e2e = np.sort([(r.finish_s - r.arrival_s) for r in tr.requests])
    ax[0].step(e2e, np.arange(1, len(e2e) + 1) / len(e2e), where="post", label=name)
    useful = [sum(w.phase != "wasted" for w in st.works) for st in tr.steps]
    ax[1].plot([st.start_s for st in tr.steps], useful, lw=0.8, label=name)
ax[0].set(xscale="log", xlabel="end-to-end latency (s, modeled)", ylabel="fraction of requests done",
          title="latency of every request")
ax[1].set(xlabel="time (s, modeled)", ylabel="slots doing useful work", title="useful slots per step")
ax[0].legend(fontsize=8)
plt.tight_layout()

# %% [markdown]
# ## 4. A load knob: where the claim holds
#
# How much continuous batching gains depends on how much traffic there is. With very little traffic, both
# policies sit mostly idle; under heavy traffic, continuous batching can keep every slot busy while static
# batching keeps discarding work. Sweep the arrival rate (dry runs: a few milliseconds each).

# %%
rates = [0.5, 1, 2, 4, 8, 16]
sweep = {name: [] for name in policies}
for rate in rates:
    wl = get_workload("chapter-7.2-longtail", rate=rate)
    for name, kw in policies.items():
        m = dry.run(wl, kw["policy"], batch_size=32, dry_run=True, progress=False,
                    **{k: v for k, v in kw.items() if k != "policy"}).metrics()
        sweep[name].append((m["time_utilization"], m["e2el_ms"]["p99"] / 1e3))

# %%
# NBVAL_CHECK_OUTPUT
print("rate (req/s)  utilisation static / continuous   p99 e2e static / continuous")
for i, rate in enumerate(rates):
    (us, ps), (uc, pc) = sweep["static"][i], sweep["continuous"][i]
    print(f"{rate:10.1f}    {us:8.1%} / {uc:6.1%}              {ps:7.1f} s / {pc:5.1f} s")

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
for name in policies:
    ax[0].plot(rates, [100 * u for u, _ in sweep[name]], "o-", label=name)
    ax[1].plot(rates, [p for _, p in sweep[name]], "o-", label=name)
ax[0].set(xscale="log", xlabel="arrival rate (requests/s)", ylabel="utilisation (% of slot-time useful)", ylim=(0, 100))
ax[1].set(xscale="log", yscale="log", xlabel="arrival rate (requests/s)", ylabel="p99 end-to-end (s, modeled)")
ax[0].legend(fontsize=8)
plt.tight_layout()

# %% [markdown]
# **Try it.** Move the arrival rate (and the policy, and the batch size) and watch the latency curves and the
# slots: each move re-runs the engine's dry run. (The static figures above are what it shows at the default
# settings.)

# %%
tw.Explorer("chapter-7.2-longtail", policy="continuous", views=("latency", "timeline"),
            controls=("policy", "rate", "batch_size", "timeout"), real_button=False)

# %% [markdown]
# At light load both policies idle most of the time and utilisation says little; the gap in p99 is what a user
# feels. As the load grows, static batching's utilisation saturates low (its slots are busy discarding
# tokens or waiting for a group to end) while continuous batching keeps filling slots with useful work.

# %% [markdown]
# ## 5. The same traffic on the real model
#
# Dry runs replay the schedule without the model. To see that the real engine makes the same schedule, run
# part of the traffic through the tiny GPT and compare.

# %%
N = len(traffic) if CHAPTER_SCALE else 16
real = engine.run(get_workload("chapter-7.2-longtail", n=N), "continuous", batch_size=32, progress=False)
replay = dry.run(get_workload("chapter-7.2-longtail", n=N), "continuous", batch_size=32, dry_run=True, progress=False)

# %%
# NBVAL_CHECK_OUTPUT
same = [[(w.slot, w.request_id, w.phase, w.tokens) for w in s.works] for s in real.steps] == \
       [[(w.slot, w.request_id, w.phase, w.tokens) for w in s.works] for s in replay.steps]
print(f"{N} requests on the real model: {len(real.steps)} steps, "
      f"{real.metrics()['output_tokens']:,} tokens generated; identical schedule in the dry run: {same}")

# %% [markdown]
# ## What to remember
#
# * Continuous batching decides the batch at every iteration: a finished sequence leaves its slot at once and a
#   queued one enters; nothing is computed for finished requests.
# * It works because every decode step is the same operation whoever is in it, and each sequence's KV cache is
#   its own, free the moment it leaves.
# * A 20-token request is done after about 20 iterations whoever shares the batch (**F6**).
# * On long-tailed traffic the GPU's slots do far more useful work and the slowest requests finish much sooner
#   (**F7**) — most clearly when traffic is heavy enough to keep the slots busy.
#
# ## Questions
#
# 1. What happens to a slot in the step right after its request produced its last token, under static and
#    under continuous batching?
# 2. Which two properties of decoding make it possible to swap sequences between steps?
# 3. Why is a 20-token request's latency (in iterations) independent of a 2,000-token request in the batch?
# 4. At very light load, why does utilisation barely differ between the policies, while p99 latency does?
# 5. New requests still need a prefill when they enter. What could that do to the sequences already decoding?
#    (Notebook 7.3.)
