# %% [markdown]
# # 7.3 Chunked prefill: prefill and decode on one chip
#
# **What you will see**: thirty users receiving tokens when a 4,000-token prompt arrives. Its whole prefill at
# once stalls the thirty; holding it back stalls the newcomer. Cut into *chunks* riding along with the decodes,
# it keeps both waits short; a chunk rides for free up to the *ridge* of the GPU's roofline. Then the chunk
# length as a knob, and what is left for Chapter 12.
#
# Times are modeled for a 70B-class model on one H200; the real engine makes the schedule.

# %% [hide-code]
import math
import re

import numpy as np
import matplotlib.pyplot as plt

import tinyserve
tinyserve.set_language("en")
import tinyserve_widgets as tw
from tinyserve.analysis.batching import schedule
from tinyserve.analysis.goodput import GOAL, goodput_per_gpu
from tinyserve.analysis.prefill import (compute_s_per_token, linear_s, ridge_tokens, ttft_ms,
                                        weight_stream_s, worst_gap_ms, worst_gap_step)
from tinyserve.analysis.sweeps import median_queue_s
from tinyserve.core.config import RunConfig
from tinyserve.core.workloads import get_workload
from tinyserve.cost.links import get_link
from tinyserve.cost.clock import ModeledClock
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.engine import Engine
from tinyserve.lang import ljust, rjust, say, t
from tinyserve.lang.glue import glue
from tinyserve_widgets.predict import Choose, Predict
from tinyserve_widgets.data import composition_sentence
from tinyserve_widgets.static import plot_composition
from tinyserve_widgets.views import COMP_SERIES

# colours that stay apart for red-green colour-blind readers (Okabe & Ito)
BLUE, ORANGE, SKY, GREY = "#0072B2", "#E69F00", "#56B4E9", "#999999"
engine = tinyserve.shared_engine()
dry = Engine()

# %%
# ▶ CHAPTER_SCALE: False checks the real model on one policy (seconds); True runs all three policies on it.
CHAPTER_SCALE = False
scenario = get_workload("chapter-7.3-long-prompt")
newcomer = next(r for r in scenario if r.id == "long")
inflight = [r.id for r in scenario if r.id != "long"]
alone = dry.run(scenario[:-1], "continuous", batch_size=32, dry_run=True, progress=False)
step_ms = 1e3 * alone.steps[10].duration_s
clock = ModeledClock(alone.hardware)
hw = clock.hardware
say("7.3.setup.inflight", n=len(inflight), tokens=scenario[0].max_new_tokens, plen=newcomer.prompt_len,
    arrival=newcomer.arrival_s)
say("7.3.setup.step", ms=step_ms)

# %% [markdown]
# ## 1. Two bad choices
#
# Two numbers per policy, on the modeled clock:
#
# * **worst gap**: the longest wait between two consecutive tokens of any of the thirty (a stutter they feel);
# * **newcomer TTFT** (*time to first token*): from the 4,000-token request's arrival to its first token.
#
# **Predict.** With *prefill-first* (the whole prompt in the next step, beside the thirty decodes), how long is
# the thirty's worst gap, in ms?

# %%
p_gap = Predict(t("7.3.predict.gap"), unit="ms", lo=0)
p_gap

# %%
policies = {
    "prefill-first": dict(policy="continuous", max_waiting_steps=0),
    "decode-first": dict(policy="continuous", max_waiting_steps=math.inf),
    "forced-20": dict(policy="continuous", max_waiting_steps=20),
    "chunked-512": dict(policy="chunked", chunk_size=512),
}
label = {name: t(f"7.3.policy.{name}") for name in policies}  # what a learner reads for each


def run(kw, eng=dry, **more):
    kw = dict(kw, **more)
    policy = kw.pop("policy")
    return eng.run(scenario, policy, batch_size=32, dry_run=eng is dry, progress=False, **kw)


traces = {name: run(kw) for name, kw in policies.items()}

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_gap.after_prediction():
    say("7.3.gaps.head")
    for name, tr in traces.items():
        say("7.3.gaps.row", name=label[name], gap=worst_gap_ms(tr, inflight), ttft=ttft_ms(tr, "long"))
    pf, df, ch = (traces[k] for k in ("prefill-first", "decode-first", "chunked-512"))
    print()
    say("7.3.gaps.chapter")
    say("7.3.gaps.engine", gap=worst_gap_ms(pf, inflight), ttft=ttft_ms(df, "long") / 1e3)
    glue("chunked_gap_x", worst_gap_ms(ch, inflight) / step_ms, "{:.1f}")  # chunked-512's worst gap, in plain steps
    print(p_gap.reveal(round(worst_gap_ms(pf, inflight), 1)))


# %% [markdown]
# Forcing the newcomer in after a bounded wait (TGI's rule) only moves the stall. Chunking keeps both low: the
# newcomer waits about as long as under prefill-first, the thirty far less, though still {glue}`chunked_gap_x`× a
# plain step (section 3 says why).
#
# ## 2. What the steps look like
#
# Left, each step's tokens and (chunked only) the **token budget**, the most a step may carry: by default the chunk
# length + 32, so every slot's decode fits beside a full chunk. Right, the longest gap (line) and each first token
# (diamonds: the thirty's at the start, the newcomer's later); the vertical line marks the newcomer's first step.

# %%
first_chunk = ch.timeline("long").first_step
tw.show(ch, k=first_chunk, views=("composition",))  # live, at the newcomer's first chunk

# %% [hide-code]
arrival = pf.timeline("long").first_step
fig, ax = plt.subplots(3, 2, figsize=(9, 8.4))
shown = ("prefill-first", "forced-20", "chunked-512")
drawn = set()  # the kinds of token some panel draws: the legend names only those
for row, name in zip(ax, shown):
    tr = traces[name]
    k = tr.timeline("long").first_step  # cursor at the newcomer's first computed step
    plot_composition(row[0], row[1], tr, k)
    drawn |= {t(f"comp.{n}") for n, attr, _ in COMP_SERIES if getattr(tr.step_arrays(), attr).any()}
    # the step's sentence one clause a line: it breaks at punctuation, never inside a word
    sentence = re.sub(r"([;；]) ?", "\\1\n", composition_sentence(tr, k))
    row[1].set_xlabel(t("axis.step") + "\n" + sentence, fontsize=8)
    for a in row:
        a.set_xlim(max(0, arrival - 5), arrival + 40)
    row[0].set_title(t("7.3.fig.tokens_per_step", name=label[name]), fontsize=9)
undrawn = {t(f"comp.{n}") for n, _, _ in COMP_SERIES} - drawn
legend = {}  # one legend under the figure, not one over each panel's bars
for a in ax.flat:
    for h, lbl in zip(*a.get_legend_handles_labels()):
        if lbl not in undrawn:
            legend[lbl.rstrip("0123456789 ")] = h  # "token budget 544" -> "token budget"
    if a.get_legend():
        a.get_legend().remove()
fig.legend(legend.values(), legend.keys(), loc="lower center", ncol=3, fontsize=8, frameon=False)
plt.tight_layout(rect=(0, 0.05, 1, 1))

# %% [markdown]
# ## 3. How far does a chunk ride for free? The ridge
#
# Every step streams all the weights once, a fixed time; each token also needs a fixed amount of arithmetic.
# The step's layers take the *longer* of the two (7.0's roofline). Thirty decodes need far less arithmetic
# than the stream takes, so a chunk's arithmetic fills the difference for free, up to the **ridge**, where
# both take equally long. Past it, every chunk token adds time the thirty wait for.
#
# **Predict.** How many chunk tokens fit beside the thirty decodes before the step gets longer?

# %%
p_ridge = Predict(t("7.3.predict.ridge"), unit=t("7.3.unit.tokens"), lo=0)
p_ridge

# %%
chunks = [64, 128, 256, 512, 1024, 2048, 4096]
sweep = {c: run(policies["chunked-512"], chunk_size=c) for c in chunks}
ridge = ridge_tokens(hw)

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_ridge.after_prediction():
    say("7.3.ridge.stream", gb=hw.weight_bytes / 1e9, tbs=hw.bandwidth_Bps / 1e12, ms=weight_stream_s(hw) * 1e3)
    say("7.3.ridge.arithmetic", params=hw.nonembed_params / 1e9, tflops=hw.peak_flops / 1e12,
        ms=compute_s_per_token(hw) * 1e3)
    fits = math.floor(ridge) - len(inflight)
    say("7.3.ridge.ridge", stream=weight_stream_s(hw) * 1e3, per_token=compute_s_per_token(hw) * 1e3, ridge=ridge)
    say("7.3.ridge.fits", n=len(inflight), fits=fits)
    print()
    say("7.3.ridge.head")
    for c, tr in sweep.items():
        n = worst_gap_step(tr, inflight).tokens  # the step the thirty waited longest for
        gap = worst_gap_ms(tr, inflight)
        extra = max(0.0, n - ridge) * compute_s_per_token(hw) * 1e3
        print(f"{c:6d} {n:25d} {extra:23.1f} ms {gap:7.1f} ms {gap / step_ms:14.2f}×")
    say("7.3.ridge.plain", ms=step_ms)
    glue("ridge", ridge, "{:.0f}")
    print(p_ridge.reveal(fits))


# %% [markdown]
# Left, one forward pass each: the weights stream once (top bar) while the decodes' and the chunk's arithmetic
# runs (bottom bar); the step lasts as long as the longer bar. Right, the roofline as time.

# %% [hide-code]
fig, ax = plt.subplots(1, 2, figsize=(9.5, 3.4), gridspec_kw={"width_ratios": [1.25, 1]})
stream, per_tok, D = weight_stream_s(hw) * 1e3, compute_s_per_token(hw) * 1e3, len(inflight)
cases = [(t("7.3.fig.decodes", n=D), 0)] + [(t("7.3.fig.plus_chunk", c=c), c) for c in (128, 512)]
for i, (_, c) in enumerate(cases):
    y = 3 * (len(cases) - 1 - i)
    first = i == 0  # label each kind of bar once
    ax[0].barh(y + 1, stream, color=SKY, height=0.8,
               label=t("7.3.fig.stream") if first else None)
    ax[0].barh(y, D * per_tok, color=BLUE, height=0.8,
               label=t("7.3.fig.decode_arith") if first else None)
    ax[0].barh(y, c * per_tok, left=D * per_tok, color=ORANGE, hatch="//", height=0.8,
               label=t("7.3.fig.chunk_arith") if first else None)
    longer = max(stream, (D + c) * per_tok)  # the step lasts as long as the longer bar
    ax[0].text(longer + 1, y + 0.5, f"{longer:.0f} ms", va="center", fontsize=8)
ax[0].axvline(stream, color="k", lw=0.8, ls=":")
ax[0].set_yticks([3 * (len(cases) - 1 - i) + 0.5 for i in range(len(cases))],
                 [lbl for lbl, _ in cases], fontsize=8)
ax[0].set(xlabel=t("7.3.fig.step_ms"), xlim=(0, 75), title=t("7.3.fig.one_pass"))
fig.legend(*ax[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8,
           frameon=False)
ns = np.unique(np.geomspace(1, 4096, 200).astype(int))
ax[1].plot(ns, [linear_s(clock, int(n)) * 1e3 for n in ns], color=BLUE)
ax[1].axvline(ridge, ls="--", color=GREY)
ax[1].text(ridge * 1.1, 10, t("7.3.fig.ridge", ridge=ridge), fontsize=8)
for c in (0, 128, 512, 2048):
    n = D + c
    ax[1].plot(n, linear_s(clock, n) * 1e3, "o", color=ORANGE if c else BLUE)
    ax[1].annotate(f"+ {c:,}" if c else cases[0][0], (n, linear_s(clock, n) * 1e3),
                   textcoords="offset points", xytext=(-6, 7), fontsize=7, ha="right")
ax[1].set(xscale="log", yscale="log", xlabel=t("7.3.fig.tokens_in_step"), ylabel=t("7.3.fig.ms_modeled"),
          title=t("7.3.fig.roofline"), ylim=(8, 700))
plt.tight_layout(rect=(0, 0.07, 1, 1))

# %% [markdown]
# Below the ridge (64, 128) the thirty barely notice the chunk (what remains: its attention, and storing
# its keys and values); past it the slowdown grows with the chunk, trading the thirty's gaps for the
# newcomer's wait.
#
# ## 4. The chunk length is a knob
#
# Small chunks: short gaps, but the prompt needs many steps. Large chunks: fewer steps, longer gaps.
#
# **Predict.** Which chunk length gives the newcomer its first token *soonest*: 64, 512 or 4,096?

# %%
p_chunk = Choose(t("7.3.predict.chunk"), {c: f"{c:,}" for c in (64, 512, 4096)})
p_chunk

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_chunk.after_prediction():
    waits = (0, 5, 20, 50, 100, 200, math.inf)
    bounded = {n: run(policies["decode-first"], max_waiting_steps=n) for n in waits}
    say("7.3.chunks.head")
    for c, tr in sweep.items():
        k = len(tr.timeline("long").chunks)
        print(f"{c:6d} {k:19d} {worst_gap_ms(tr, inflight):8.1f} ms {ttft_ms(tr, 'long'):11.1f} ms")
    best = min(sweep, key=lambda c: ttft_ms(sweep[c], "long"))
    say("7.3.chunks.best", best=best)
    offered = sorted(p_chunk.options, key=lambda c: ttft_ms(sweep[c], "long"))  # soonest first
    print(p_chunk.reveal(offered[0], why=t("7.3.chunks.why", best=offered[0], best_ms=ttft_ms(sweep[offered[0]], "long"),
                                           worst=offered[-1], worst_ms=ttft_ms(sweep[offered[-1]], "long"),
                                           steps=len(sweep[offered[-1]].timeline("long").chunks))))


# %% [reveal, hide-code]
with p_chunk.after_prediction():
    fig, ax = plt.subplots(figsize=(7, 4))
    point = {c: (ttft_ms(t, "long"), worst_gap_ms(t, inflight)) for c, t in sweep.items()}
    held = {n: (ttft_ms(t, "long"), worst_gap_ms(t, inflight)) for n, t in bounded.items()}
    ax.plot(*zip(*point.values()), "o-", color=BLUE, label=t("7.3.fig.chunked"))
    for c, xy in point.items():
        ax.annotate(str(c), xy, textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.plot(*zip(*held.values()), "s--", color=GREY, label=t("7.3.fig.held"))
    for n, xy in held.items():
        ax.annotate("∞" if n == math.inf else str(n), xy, textcoords="offset points",
                    xytext=(4, -10), fontsize=8, color=GREY)
    ax.axhline(step_ms, ls=":", color="k", lw=0.8)
    ax.text(1800, step_ms * 1.05, t("7.3.fig.plain_step"), fontsize=7)
    ax.set(xscale="log", yscale="log", xlabel=t("7.3.fig.newcomer_ttft"), ylabel=t("7.3.fig.worst_gap"),
           title=t("7.3.fig.tradeoff"))
    ax.minorticks_off()
    ax.set_xticks([500, 1000, 2000, 5000], ["500", "1,000", "2,000", "5,000"])
    ax.set_yticks([20, 50, 100, 200, 500], ["20", "50", "100", "200", "500"])
    ax.legend(fontsize=8, loc="center right", frameon=False);


# %% [markdown]
# Without chunking (grey), waiting only postpones the stall; never interrupting (∞) makes the newcomer wait
# seconds. Chunking (blue) opens the lower left. A newcomer alone is fastest in one big step, as every extra step
# pays the weight stream again; chunks near the ridge cost it a couple hundred ms and the thirty almost
# nothing.
#
# **Try it.** Move the chunk length and budget, or try `continuous`. *Run on the real model* runs your settings
# on the tiny GPT here (seconds, this machine's clock).

# %%
tw.Explorer("chapter-7.3-long-prompt", policy="chunked", chunk_size=512, views=("composition",),
            controls=("policy", "chunk_size", "max_batch_tokens", "order", "max_waiting_steps"),
            real_button=True)

# %% [markdown]
# ## 5. The same schedule on the real model

# %%
check = ["chunked-512"]
if CHAPTER_SCALE:
    check += ["prefill-first", "decode-first"]
real = {name: run(policies[name], eng=engine) for name in check}

# %%
# NBVAL_CHECK_OUTPUT
for name, tr in real.items():
    same = schedule(tr) == schedule(traces[name])
    say("7.3.real.row", name=label[name], steps=len(tr.steps), same=t("7.3.real.same" if same else "7.3.real.differs"))

# %% [markdown]
# ## 6. Prefill and decode on separate GPUs
#
# Chapter 12's *disaggregated serving* runs prefill and decode on separate GPUs, each prompt's KV sent from one to
# the other (DistServe, OSDI '24).
#
# **Targets first.** A request meets its *SLO* (service-level objective) when its TTFT and its *TPOT* (time per output
# token: the mean gap after the first) are within target; *goodput* is the highest rate at which {glue}`goal_pct`% do,
# per GPU. DistServe's chatbot targets for OPT-66B, the size nearest ours: TTFT ≤ {glue}`slo_ttft` ms, TPOT ≤
# {glue}`slo_tpot` ms ({glue}`idle_miss` of our {glue}`n_mixed` requests miss that TTFT even alone).

# %%
# NBVAL_CHECK_OUTPUT
TTFT_MS, TPOT_MS = 400, 100  # DistServe's chatbot targets for OPT-66B (appendix B: the source)
TIGHT_TPOT_MS = 25  # a what-if of ours for later: a quarter of DistServe's TPOT
# each request alone: 200 requests arriving 100 s apart, on one GPU
idle = dry.run("chapter-7.3-mixed", "continuous", dry_run=True, progress=False, workload_knobs={"rate": 0.01})
idle_miss = sum(ttft_ms(idle, r.id) > TTFT_MS for r in idle.requests)
say("7.3.split.idle", n=idle_miss, total=len(idle.requests), ttft=TTFT_MS)
glue("slo_ttft", TTFT_MS)
glue("slo_tpot", TPOT_MS)
glue("idle_miss", idle_miss)
glue("goal_pct", 100 * GOAL, "{:.0f}")
glue("n_mixed", len(idle.requests))

# %% [markdown]
# Two H200s serve `chapter-7.3-mixed` (chat turns mixed with 2,000–3,500-token prompts): two chunked replicas,
# or a prefill and a decode GPU over NVLink.
#
# **Predict.** Which has the higher goodput per GPU: the two replicas or the split?

# %%
p_split = Choose(t("7.3.predict.split"), {"replicas": t("7.3.choice.replicas"), "split": t("7.3.choice.split")})
p_split

# %%
RATES = (0.5, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12)  # requests/s, the whole deployment's
PAIRS = {"distserve": (TTFT_MS, TPOT_MS), "tight": (TTFT_MS, TIGHT_TPOT_MS)}


def slo_sweep(dc, chunk=512, rates=RATES, **knobs):
    """Dry runs of chapter-7.3-mixed at each rate; per target pair: goodput per GPU and attainment per rate."""
    rows, last, fixed = {pair: [] for pair in PAIRS}, None, knobs.pop("workload_knobs", {})
    for rate in rates:
        rc = RunConfig("chunked", chunk_size=chunk, dry_run=True, workload_knobs={**fixed, "rate": rate}, **knobs)
        last = run_deployment(dry, "chapter-7.3-mixed", rc, dc)
        for pair, (ttft, tpot) in PAIRS.items():
            rows[pair].append({"deployment": "", "kind": dc.kind, "num_gpus": last.num_gpus, "rate": rate,
                               "attainment": last.slo(ttft, tpot)["attainment"]})
    out = {pair: {"goodput": goodput_per_gpu(r)[0]["goodput_per_gpu"], "attainment": [x["attainment"] for x in r]}
           for pair, r in rows.items()}
    return {**out, "gpus": last.num_gpus, "last": last}


two_replicas = DeploymentConfig("colocated", replicas=2)
one_plus_one = DeploymentConfig("disaggregated", prefill_instances=1, decode_instances=1)  # NVLink by default
CHUNKS = (128, 512, 4096)  # under the ridge, the chapter's, longer than any prompt (no cutting)
shared = {c: slo_sweep(two_replicas, chunk=c) for c in CHUNKS}
split = slo_sweep(one_plus_one)  # both GPUs run 512-token chunks


def per_gpu(g):
    """A goodput per GPU as printed: below the lowest rate tried when even that one misses the goal."""
    return t("7.3.split.below", rate=RATES[0] / 2) if g is None else f"{g:.3g}"


# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_split.after_prediction():
    best = max(CHUNKS, key=lambda c: shared[c]["distserve"]["goodput"] or 0)
    winner = "replicas" if (shared[best]["distserve"]["goodput"] or 0) > (split["distserve"]["goodput"] or 0) else "split"
    print(p_split.reveal(winner, why=t("7.3.split.why", ttft=TTFT_MS, tpot=TPOT_MS, chunk=best,
                                       co=per_gpu(shared[best]["distserve"]["goodput"]),
                                       split=per_gpu(split["distserve"]["goodput"]))))
    say("7.3.split.head", ttft=TTFT_MS, tpot=TPOT_MS, tight=TIGHT_TPOT_MS)
    for c in CHUNKS:
        print(ljust(t("7.3.split.replicas", chunk=c), 38) + "".join(rjust(per_gpu(shared[c][p]["goodput"]), 12)
                                                                  for p in PAIRS))
    print(ljust(t("7.3.split.split"), 38) + "".join(rjust(per_gpu(split[p]["goodput"]), 12) for p in PAIRS))
    tight_best = max(CHUNKS, key=lambda c: shared[c]["tight"]["goodput"] or 0)
    glue("gp_split", split["distserve"]["goodput"], "{:.3g}")
    glue("gp_co", shared[best]["distserve"]["goodput"], "{:.3g}")
    glue("best_chunk", best, "{:,}")
    glue("tpot_tight", TIGHT_TPOT_MS)
    glue("gp_split_t", split["tight"]["goodput"], "{:.3g}")
    glue("gp_co_t", shared[tight_best]["tight"]["goodput"], "{:.3g}")


# %% [reveal, hide-code]
with p_split.after_prediction():
    fig, ax = plt.subplots(1, 2, figsize=(9.5, 3.8), sharey=True)
    per_gpu_rates = [r / 2 for r in RATES]
    styles = {128: dict(color=SKY, ls=":", marker="."), 512: dict(color=BLUE, ls="--", marker="."),
              4096: dict(color=BLUE, ls="-", marker=".")}
    for a, (pair, (ttft, tpot)) in zip(ax, PAIRS.items()):
        for c in CHUNKS:
            a.plot(per_gpu_rates, [100 * x for x in shared[c][pair]["attainment"]],
                   label=t("7.3.split.replicas", chunk=c), **styles[c])
        a.plot(per_gpu_rates, [100 * x for x in split[pair]["attainment"]], color=ORANGE, lw=2.2, marker="o",
               ms=4, label=t("7.3.split.split"))
        a.axhline(90, color=GREY, ls="--", lw=0.8)
        a.text(per_gpu_rates[-1], 91, t("7.3.fig.goal"), ha="right", va="bottom", fontsize=8, color=GREY)
        a.set(title=t("7.3.fig.slo_panel", ttft=ttft, tpot=tpot), xlabel=t("7.3.fig.rate_per_gpu"), ylim=(0, 102))
    ax[0].set_ylabel(t("7.3.fig.attainment"))
    fig.suptitle(t("7.3.fig.slo_title"), fontsize=11)
    fig.legend(*ax[0].get_legend_handles_labels(), loc="lower center", ncol=4, fontsize=8, frameon=False)
    plt.tight_layout(rect=(0, 0.07, 1, 1))


# %% [markdown]
# Left, at DistServe's targets, the split loses: {glue}`gp_split` against {glue}`gp_co` requests/s per GPU. Its
# one prefill GPU computes every prompt; the replicas share them, prompt and decode work riding one weight stream.
# Their best chunk, {glue}`best_chunk` tokens, cuts nothing: TPOT is a mean, which a few long steps barely move.
# Right, TPOT ≤ {glue}`tpot_tight` ms: no chunk length meets both targets (section 4's trade-off), and the split
# wins, {glue}`gp_split_t` against {glue}`gp_co_t`. More in appendix B.

# %%
# ▶ Try it: colocated or split, P and D, the link, the targets, the rate. The timeline stacks the GPUs on one
# clock; arrows are KV transfers.
tw.DeploymentExplorer("chapter-7.3-mixed", "chunked", deployment="disaggregated", ttft_ms=TTFT_MS, tpot_ms=TPOT_MS,
                      rate=4.0, chunk_size=512)

# %% [markdown]
# ## What to remember
#
# * A newcomer's prefill and the in-flight decodes pull in opposite directions: run it all now and the decodes
#   stall; wait and the newcomer stalls.
# * A chunk rides free beside the decodes up to the ridge (~{glue}`ridge` tokens a step here); past it, every
#   chunk token lengthens their step.
# * The chunk length walks the trade-off between the in-flight users' gaps and the newcomer's wait.
# * Prefill and decode GPUs of their own pay off only where no chunk length meets both SLO targets.
#
# ## Questions
#
# 1. Why is a prefill step compute-bound and a decode step memory-bound?
# 2. Under prefill-first, who pays for a 4,000-token prompt, and how?
# 3. Why does bounding decode-first's wait not remove the stall?
# 4. Why does a 128-token chunk barely slow the thirty while a 512-token chunk makes their step
#    {glue}`chunked_gap_x`× longer?

# %% [markdown]
# ## Appendix A: chunk lengths under traffic
#
# 7.2's long-tail traffic (150 requests, a fifth with 800–2,500-token prompts), chunked, at a moderate and a
# heavy load. *p99* is the request slower than 99% of them; *wait for a slot*, the median queueing before one
# of the 32 slots takes a request.

# %%
# NBVAL_CHECK_OUTPUT
say("7.3.load.head")
p99 = {}  # TTFT p99 in s, by (load, chunk length)
for rate in (4, 16):
    load = get_workload("chapter-7.2-longtail", rate=rate, n=150)
    for c in (128, 512, 2048):
        tr = dry.run(load, "chunked", batch_size=32, chunk_size=c, dry_run=True, progress=False)
        gap, ttft = tr.metrics()["itl_ms"], tr.metrics()["ttft_ms"]
        p99[rate, c] = ttft["p99"] / 1e3
        say("7.3.load.row", rate=rate, chunk=c, gap=gap["p99"], p50=ttft["p50"] / 1e3, p99=p99[rate, c],
            wait=median_queue_s(tr))
glue("p99_4_512", p99[4, 512], "{:.2f}")
glue("p99_4_2048", p99[4, 2048], "{:.2f}")
# prompt tokens arriving per second at the heavy load, and how many ride free beside thirty decodes (section 3)
glue("prompt_tokens_s", rate * np.mean([r.prompt_len for r in load]), "{:,.0f}")
glue("free_tokens_s", fits / step_ms * 1e3, "{:,.0f}")

# %% [markdown]
# At 4 requests/s nobody waits for a slot, yet section 4's ranking fails: TTFT p99 is lowest at 512
# ({glue}`p99_4_512` s), highest at 2,048 ({glue}`p99_4_2048` s). Prompts now meet: small chunks stretch a long
# prompt over many steps, big ones make whoever arrives behind it wait through its long steps. At 16
# requests/s the 32 slots are full and most of a TTFT is the wait for one, which no chunk length removes; the
# smallest chunks win every column, as short steps free slots sooner.
#
# What chunking cannot fix: at 16 requests/s prompts bring about {glue}`prompt_tokens_s` tokens a second,
# roughly what rides free beside thirty decodes ({glue}`free_tokens_s` a second). Beyond that, bigger chunks
# slow the decodes and smaller ones leave prompts waiting: prefill and decode contend for one chip. The book
# (§7.3) leaves this to Chapter 12: disaggregated serving, prefill and decode on separate GPUs.

# %% [markdown]
# ## Appendix B: where the split loses, and where it wins
#
# **The targets.** DistServe's artifact draws the paper's Figure 8 (its chatbot workload, ShareGPT conversations)
# with these targets, each with a 90% goal: TTFT 0.25 s and TPOT 0.1 s for OPT-13B, 0.4 s and 0.1 s for OPT-66B,
# 4 s and 0.2 s for OPT-175B (https://github.com/LLMServe/DistServe, `distserve/evaluation/ae-scripts/e2e/_plot.py`).
# We took OPT-66B's, the size nearest our 70B-class model. Its TPOT target is about five of our plain decode
# steps ({glue}`plain_step` ms); its TTFT target was set for chat prompts of a few hundred tokens and is about
# as long as our longest prompts' prefill alone. The 25 ms what-if is ours: little more than a plain step.
#
# **What ran.** Each point is a dry run of the same {glue}`n_mixed` requests at one rate (Poisson arrivals; a rate
# moves the arrivals, not the prompts), modeled on `h200-70b-fp8`, 32 slots per GPU. Goodput is read where the
# attainment first falls below the goal, interpolated between the two rates tried around it ({glue}`lowest_per_gpu`
# to {glue}`highest_per_gpu` requests/s per GPU were tried). Below, the same sweep with one thing changed at a
# time.

# %%
# NBVAL_CHECK_OUTPUT
ib = slo_sweep(DeploymentConfig("disaggregated", prefill_instances=1, decode_instances=1, link="ib-ndr"))
# the replicas keep section 6's best chunk; the split's GPUs keep 512-token chunks
short = {"replicas": slo_sweep(two_replicas, chunk=best, workload_knobs={"long_share": 0.0}),
         "split": slo_sweep(one_plus_one, workload_knobs={"long_share": 0.0})}
few = int(8 * 4096 * hw.kv_bytes_per_token)  # KV for 8 slabs of 4,096 positions per GPU
scarce = {"replicas": slo_sweep(two_replicas, chunk=best, kv_budget=few),
          "split": slo_sweep(one_plus_one, kv_budget=few)}
RATES4 = (1, 2, 4, 6, 8, 10, 12, 14, 16, 20, 24)
four = {"replicas": slo_sweep(DeploymentConfig("colocated", replicas=4), chunk=best, rates=RATES4),
        "3+1": slo_sweep(DeploymentConfig("disaggregated", prefill_instances=3, decode_instances=1), rates=RATES4),
        "2+2": slo_sweep(DeploymentConfig("disaggregated", prefill_instances=2, decode_instances=2), rates=RATES4)}
say("7.3.split.head", ttft=TTFT_MS, tpot=TPOT_MS, tight=TIGHT_TPOT_MS)
replicas, one_one = t("7.3.split.replicas", chunk=best), t("7.3.split.split")
rows = [("7.3.cases.section6", {replicas: shared[best], one_one: split}),
        ("7.3.cases.ib", {one_one: ib}),
        ("7.3.cases.short", {replicas: short["replicas"], one_one: short["split"]}),
        ("7.3.cases.scarce", {replicas: scarce["replicas"], one_one: scarce["split"]}),
        ("7.3.cases.four", {t("7.3.cases.four_replicas", chunk=best): four["replicas"],
                            t("7.3.cases.four_split", p=3, d=1): four["3+1"],
                            t("7.3.cases.four_split", p=2, d=2): four["2+2"]})]
for key, runs in rows:
    say(key)
    for name, res in runs.items():
        print("  " + ljust(name, 36) + "".join(rjust(per_gpu(res[p]["goodput"]), 12) for p in PAIRS))
print()
slots = {name: [tr.num_slots for tr in res["last"].instances] for name, res in scarce.items()}
say("7.3.cases.slots", replicas=sum(slots["replicas"]), decode=slots["split"][1])
light = {name: res["distserve"]["attainment"][0] for name, res in (("replicas", shared[best]), ("split", split))}
say("7.3.cases.light", rate=RATES[0], replicas=100 * light["replicas"], split=100 * light["split"])
xfer = {name: res["last"].metrics()["transfer_ms"] for name, res in (("nvlink", split), ("ib", ib))}
say("7.3.cases.xfer", nvlink=xfer["nvlink"]["p50"], ib=xfer["ib"]["p50"], ib_max=xfer["ib"]["max"],
    rate=RATES[-1])

# %% [hide-code]
# the numbers the text below quotes, from the runs above
glue("plain_step", step_ms, "{:.1f}")
glue("lowest_per_gpu", RATES[0] / 2, "{:g}")
glue("highest_per_gpu", RATES[-1] / 2, "{:g}")
glue("light_rate", RATES[0], "{:g}")
glue("light_co", 100 * light["replicas"], "{:.1f}")
glue("light_split", 100 * light["split"], "{:.1f}")
glue("xfer_nvlink", xfer["nvlink"]["p50"], "{:.1f}")
glue("xfer_ib", xfer["ib"]["p50"], "{:.1f}")
glue("xfer_ib_max", xfer["ib"]["max"], "{:.1f}")
glue("ib_gbs", get_link("ib-ndr").bandwidth_Bps / 1e9, "{:.0f}")
glue("nvlink_gbs", get_link("nvlink-h200").bandwidth_Bps / 1e9, "{:.0f}")
glue("short_co", short["replicas"]["tight"]["goodput"], "{:.3g}")
glue("short_split", short["split"]["tight"]["goodput"], "{:.3g}")
glue("scarce_co", per_gpu(scarce["replicas"]["tight"]["goodput"]))
glue("scarce_split", per_gpu(scarce["split"]["tight"]["goodput"]))
glue("scarce_slots", slots["split"][1])
glue("scarce_replica_slots", sum(slots["replicas"]))
glue("four_co", four["replicas"]["distserve"]["goodput"], "{:.3g}")
glue("four_31", four["3+1"]["distserve"]["goodput"], "{:.3g}")
glue("four_co_t", four["replicas"]["tight"]["goodput"], "{:.3g}")
glue("four_31_t", four["3+1"]["tight"]["goodput"], "{:.3g}")
glue("four_22_t", four["2+2"]["tight"]["goodput"], "{:.3g}")

# %% [markdown]
# * **Light load.** At {glue}`light_rate` requests/s there is nothing to win: the replicas meet their targets for
#   {glue}`light_co`% of requests, the split for {glue}`light_split`% (its prefill GPU cuts long prompts into
#   512-token chunks, and a few more miss 400 ms), and it adds a transfer before each second token (median
#   {glue}`xfer_nvlink` ms over NVLink).
# * **A slow link.** Over InfiniBand NDR ({glue}`ib_gbs` GB/s against NVLink's {glue}`nvlink_gbs`) the median
#   transfer takes {glue}`xfer_ib` ms, at most {glue}`xfer_ib_max`, and goodput does not move: a transfer delays
#   one token of a request, and TPOT spreads it over all of them.
# * **Short prompts.** Without long prompts there is nothing to keep apart. At DistServe's targets both meet every
#   rate tried; at TPOT ≤ 25 ms the split loses ({glue}`short_split` against {glue}`short_co`), as its one decode
#   GPU now carries every decode.
# * **Scarce KV.** With KV for 8 slabs a GPU, the decode GPU holds {glue}`scarce_slots` requests at once and the
#   two replicas {glue}`scarce_replica_slots`; at TPOT ≤ 25 ms the split reaches {glue}`scarce_split` against
#   {glue}`scarce_co` on this draw, and on other draws of the same traffic it comes out ahead or behind.
# * **Four GPUs.** Now the split can give prompts more GPUs than decodes, DistServe's own point (it chose each
#   phase's GPUs per model): three prefill GPUs and one decode GPU reach {glue}`four_31` requests/s per GPU at
#   DistServe's targets against {glue}`four_co` for four replicas, and {glue}`four_31_t` against
#   {glue}`four_co_t` at TPOT ≤ 25 ms (two and two: {glue}`four_22_t`).
#
# **How far to trust it.** The {glue}`goal_pct`% goal sits a few points under what an idle GPU reaches, so a
# goodput read off a sweep moves with the draw of {glue}`n_mixed` requests: read the order, not the ratios. The
# cost model charges a mixed step its roofline time and nothing for prefill and decode getting in each other's
# way inside a step, which DistServe measured on real GPUs; its baseline also ran whole prompts without chunks.
# Both favour the split more than this model does.
