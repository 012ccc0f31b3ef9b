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
from tinyserve.analysis import fair
from tinyserve.analysis.goodput import GOAL, parse_spec
from tinyserve.analysis.prefill import (compute_s_per_token, linear_s, ridge_tokens, ttft_ms,
                                        weight_stream_s, worst_gap_ms, worst_gap_step)
from tinyserve.analysis.sweeps import median_queue_s
from tinyserve.core.config import RunConfig
from tinyserve.core.workloads import get_workload
from tinyserve.cost.clock import ModeledClock
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.engine import Engine
from tinyserve.lang import ljust, rjust, say, t
from tinyserve.lang.glue import glue
from tinyserve_widgets.predict import Choose, Predict, prose
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
# Chapter 12's *disaggregated serving* puts prefill and decode on separate GPUs (DistServe, OSDI '24).
#
# **Targets.** A request meets its *SLO* when its TTFT and *TPOT* (time per output token: the mean gap after the
# first) are within target; *goodput* is the highest rate at which {glue}`goal_pct`% do, per GPU, sustained
# (appendix B). Three target pairs: DistServe's paper's and artifact's, and our *tight*, TPOT near a plain step
# ({glue}`plain_step` ms).

# %%
# NBVAL_CHECK_OUTPUT
STUDIES = fair.load()  # the sweeps section 6 and appendix B read: run once by benchmarks/deployments.py
PAIRS = {name: tuple(STUDIES["pairs"][name]) for name in fair.PAIRS}  # the paper's, the artifact's, ours
ART_TTFT = PAIRS["artifact"][0]
# each request alone: 200 requests arriving 100 s apart, on one GPU
idle = dry.run("chapter-7.3-mixed", "continuous", dry_run=True, progress=False, workload_knobs={"rate": 0.01})
idle_miss = sum(ttft_ms(idle, r.id) > ART_TTFT for r in idle.requests)
for name, (ttft, tpot) in PAIRS.items():
    say("7.3.split.pair", name=t(f"figures.fair.pair.{name}"), ttft=ttft, tpot=tpot)
say("7.3.split.idle", n=idle_miss, total=len(idle.requests), ttft=f"{ART_TTFT:g}")
glue("paper_ttft", PAIRS["paper"][0], "{:,.0f}")
glue("paper_tpot", PAIRS["paper"][1], "{:.0f}")
glue("art_ttft", ART_TTFT, "{:.0f}")
glue("art_tpot", PAIRS["artifact"][1], "{:.0f}")
glue("tight_tpot", PAIRS["tight"][1], "{:.0f}")
glue("plain_step", step_ms, "{:.1f}")
glue("idle_miss", idle_miss)
glue("goal_pct", 100 * GOAL, "{:.0f}")
glue("n_mixed", len(idle.requests))

# %% [markdown]
# Two H200s serve `chapter-7.3-mixed`: two replicas, or a prefill and a decode GPU, each at its best; a claim
# holds on all {glue}`n_seeds` traffic draws.
#
# **Predict.** At the paper's targets, which has more goodput per GPU?

# %%
p_split = Choose(t("7.3.predict.split"), {"replicas": t("7.3.choice.replicas"), "split": t("7.3.choice.split")})
p_split

# %% [hide-code]
# the grid and the size of the sweep the cells below read
two = STUDIES["studies"]["fair-2"]
glue("grid_chunks", ", ".join(f"{c:,}" for c in fair.CHUNKS if c != "none"))
glue("grid_batches", ", ".join(map(str, fair.BATCHES)))
glue("memory_slots", fair.memory_slots())
glue("n_seeds", len(two["seeds"]))
# every rate run of every deployment and seed, and one saturation run each, the doubling check's included
glue("n_runs", sum(len(met) + 1 for s in STUDIES["studies"].values() for runs in (s, s["doubled"])
                   for side in runs["sides"].values() for entry in side.values() for met in entry["met"].values()),
     "{:,}")
glue("settled_pct", 100 * fair.SETTLED, "{:g}")
unsettled, readings = fair.unsettled(STUDIES)
glue("n_unsettled", unsettled)
glue("n_readings", readings)
glue("steady_min", STUDIES["steady"]["min_requests"], "{:,}")
glue("steady_span", STUDIES["steady"]["span_s"], "{:g}")
glue("sat_requests", STUDIES["steady"]["saturation_requests"], "{:,}")


def median_of(result):
    """A side's median goodput per GPU in a comparison (below the sweep: lowest)."""
    value = result[1]["median"]
    return -1.0 if value is None else value


# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_split.after_prediction():
    paper = fair.claim(STUDIES, "fair2_paper")
    winner = "split" if median_of(paper["split"]) > median_of(paper["replicas"]) else "replicas"
    print(p_split.reveal(winner, why=t("7.3.split.why", claim=fair.claim_words(STUDIES, "fair2_paper"))))
    say("7.3.split.head", n=len(two["seeds"]))
    print("\n".join(fair.table(STUDIES, "fair-2")))
    tight_co = parse_spec(fair.best(two, "replicas", "tight")[0])[1].get("chunk_size")
    glue("tight_co_chunk", t("7.3.split.chunk_words", chunk=tight_co) if tight_co else t("figures.fair.whole"))
    # TPOT is a mean: a step carrying the best chunk beside the thirty of section 3, against a plain step
    mixed_ms = worst_gap_ms(sweep[tight_co if tight_co in sweep else max(sweep)], inflight)
    glue("mixed_ms", mixed_ms, "{:.0f}")
    glue("one_in", (mixed_ms - step_ms) / (PAIRS["tight"][1] - step_ms), "{:.0f}")
    # the verdicts in words, hidden with the table until the learner has predicted
    prose(t("7.3.split.verdicts", paper=fair.claim_words(STUDIES, "fair2_paper"), slots=fair.memory_slots(),
            split=fair.sustains(fair.best(two, "split", "paper")[1]),
            replicas=fair.sustains(fair.best(two, "replicas", "paper")[1]),
            tight=fair.claim_words(STUDIES, "fair2_tight")))
    for side in ("replicas", "split"):
        # and the target each side's best at the tight pair misses first (its goodput on that target alone)
        glue(f"{side}_binds", fair.binds(two, side, fair.best(two, side, "tight")[0], "tight").upper())
    # 128-token chunks alone: how many requests miss the artifact's TTFT with nothing else running
    small = dry.run("chapter-7.3-mixed", "chunked", chunk_size=128, dry_run=True, progress=False,
                    workload_knobs={"rate": 0.01})
    glue("c128_miss", sum(ttft_ms(small, r.id) > ART_TTFT for r in small.requests))
    glue("c128_steps", math.ceil(max(r.prompt_len for r in small.requests) / 128))


# %% [reveal, hide-code]
with p_split.after_prediction():
    per_gpu_rates = [r / two["gpus"] for r in two["rates"]]
    fig, ax = plt.subplots(1, 3, figsize=(10, 3.7), sharey=True)
    for side, color in (("replicas", BLUE), ("split", ORANGE)):
        best_label = fair.best(two, side, "tight")[0]  # (not `label`: section 1's cells read that name)
        for a, kind in zip(ax, fair.KINDS):
            for i, seed in enumerate(two["seeds"]):
                curve = fair.curve(two, side, best_label, seed, "tight", kind=kind)  # stops past saturation
                a.plot(per_gpu_rates[:len(curve)], [100 * x for x in curve], color=color, lw=1.2, alpha=0.7,
                       marker=".", ms=3, label=fair.describe(best_label) if i == 0 else None)
    for a, kind in zip(ax, fair.KINDS):
        a.axhline(100 * GOAL, color=GREY, ls="--", lw=0.8)
        a.set(title=t(f"7.3.fig.kind.{kind}"), xscale="log", xlabel=t("7.3.fig.rate_per_gpu"), ylim=(0, 102))
        a.set_xticks([0.25, 0.5, 1, 2, 4, 8, 15], ["0.25", "0.5", "1", "2", "4", "8", "15"])
        a.minorticks_off()
    ax[0].set_ylabel(t("7.3.fig.attainment"))
    fig.suptitle(t("7.3.fig.slo_title", ttft=PAIRS["tight"][0], tpot=PAIRS["tight"][1]), fontsize=11)
    fig.legend(*ax[0].get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8, frameon=False)
    plt.tight_layout(rect=(0, 0.08, 1, 1))


# %% [markdown]
# At the tight targets the replicas miss {glue}`replicas_binds` first (right): TPOT is a mean, and a step carrying
# {glue}`tight_co_chunk` takes {glue}`mixed_ms` ms, a plain one {glue}`plain_step` ms: once one step in
# {glue}`one_in` carries a chunk the mean passes {glue}`tight_tpot` ms. The split misses {glue}`split_binds` first
# (middle): one GPU prefills every prompt.

# %%
# ▶ Try it: colocated or split, P and D, each role's chunk, batch and GPUs, the link, the targets, the rate. The
# timeline stacks the GPUs on one clock; arrows are KV transfers.
tw.DeploymentExplorer("chapter-7.3-mixed", "chunked", deployment="disaggregated", ttft_ms=ART_TTFT,
                      tpot_ms=PAIRS["tight"][1], rate=2.0, chunk_size=512)

# %% [markdown]
# ## What to remember
#
# * A newcomer's prefill and the in-flight decodes pull in opposite directions: run it all now and the decodes
#   stall; wait and the newcomer stalls.
# * A chunk rides free beside the decodes up to the ridge (~{glue}`ridge` tokens a step here); past it, every
#   chunk token lengthens their step.
# * The chunk length walks the trade-off between the in-flight users' gaps and the newcomer's wait.
# * Separate prefill and decode GPUs paid off only at the tight targets, and only with DistServe's TTFT and one
#   GPU a phase (appendix B).
#
# ## Questions
#
# 1. Why is a prefill step compute-bound and a decode step memory-bound?
# 2. Under prefill-first, who pays for a 4,000-token prompt, and how?
# 3. Why does bounding decode-first's wait not remove the stall?
# 4. Why does a 128-token chunk barely slow the thirty while a 512-token chunk makes their step
#    {glue}`chunked_gap_x`× longer?
# 5. At the tight targets, which target does each side miss first, and why?

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
# **The targets.** *The paper's*, TTFT ≤ {glue}`paper_ttft` ms and TPOT ≤ {glue}`paper_tpot` ms, are what
# DistServe's plotting notebook for its Figure 8 (the chatbot workload, ShareGPT conversations) uses for OPT-66B,
# the size nearest ours. *The artifact's*, {glue}`art_ttft` ms and {glue}`art_tpot` ms, come from
# `evaluation/ae-scripts/e2e/_plot.py` in https://github.com/LLMServe/DistServe, the script that draws the
# comparison with vLLM alone ({glue}`claim_fair2_artifact`); that TTFT target was set for chat prompts of a few
# hundred tokens, and
# {glue}`idle_miss` of our {glue}`n_mixed` requests miss it even alone on an idle GPU. *Tight*, ours, keeps that
# TTFT with a TPOT target of {glue}`tight_tpot` ms, little more than a plain decode step, so that TPOT can bind:
# at the other two it never does here (7.5, section 6, says why).
#
# **What ran.** Each point is a dry run at one rate (Poisson arrivals; a rate moves the arrivals, not the prompts),
# modeled on `h200-70b-fp8`: rates from {glue}`lowest_per_gpu` to {glue}`highest_per_gpu` requests/s per GPU, on
# {glue}`n_seeds` seeds. A run sends {glue}`steady_span` s of arrivals and at least {glue}`steady_min` requests: a
# short burst above what a deployment sustains only shows its queue starting to fill, and reads a goodput it cannot
# keep. Each deployment's *saturation*, the requests it completes per second when overloaded, is measured on
# {glue}`sat_requests` requests; its curve stops a little past it, and no goodput here is above it. Both sides
# searched the same knobs: a chunk length ({glue}`grid_chunks` tokens, or whole prompts; the split's for its prefill
# GPU) and a batch size ({glue}`grid_batches`, capped by memory at {glue}`memory_slots` slots, so {glue}`memory_slots`
# is what the larger two run); {glue}`n_runs` dry runs in all, run once by `benchmarks/deployments.py` and read by
# these cells. Goodput is read on each seed where the attainment first falls below the goal, interpolated between the
# two rates around it, as DistServe's scripts read it. A side's best is its highest median. Each side's best then ran
# again with every run twice as long: where its median or either end of its range moves by more than
# {glue}`settled_pct`%, the number is marked *unsettled*, with what the longer runs read beside it ({glue}`n_unsettled`
# of the {glue}`n_readings` readings these cells can quote). At {glue}`art_ttft` ms the curves run flat just above
# the goal, so a few requests more or less move the crossing a long way: there, read the verdicts, which hold on every
# seed at both lengths, not the digits. Below, one thing changed at a time.

# %%
# NBVAL_CHECK_OUTPUT
studies = STUDIES["studies"]
for key, study, pairs, conv in (("7.3.cases.decode", "fair-2", ("tight", "paper"), "decode"),
                                ("7.3.cases.short", "short-2", ("tight",), "prefill"),
                                ("7.3.cases.scarce", "scarce-2", ("tight", "paper"), "prefill"),
                                ("7.3.cases.three", "fair-3", ("tight", "paper"), "prefill"),
                                ("7.3.cases.four", "fair-4", ("tight", "paper"), "prefill"),
                                ("7.3.cases.tp", "tp-4", ("tight", "paper"), "prefill")):
    say(key)
    print("\n".join("  " + line for line in fair.table(STUDIES, study, pairs, conv)))
say("7.3.cases.ib")
for conv in fair.CONVENTIONS:  # the split's best over each link, under each convention
    nv, ib = (fair.best(studies[s], "split", "tight", conv)[1] for s in ("fair-2", "ib-2"))
    say("7.3.cases.link_row", conv=t(f"7.3.cases.conv.{conv}"), nvlink=fair.number_words(nv),
        ib=fair.number_words(ib))
    glue(f"nv_tight_{conv}", fair.number_words(nv))
    glue(f"ib_tight_{conv}", fair.number_words(ib))
# the infeasible: requests that miss the artifact's TTFT even alone, per seed (fair.alone), as a range
alone = STUDIES["infeasible"]["plain"]
missed = {key: sorted(a[conv]["artifact"] for a in alone[link].values())
          for key, link, conv in (("ib", "ib-ndr", "decode"), ("nv", "nvlink-h200", "decode"),
                                  ("pre", "nvlink-h200", "prefill"))}
for key, counts in missed.items():
    glue(f"{key}_alone", t("7.3.cases.range", low=counts[0], high=counts[-1]) if counts[0] != counts[-1]
         else f"{counts[0]}")
n_alone = next(iter(alone["ib-ndr"].values()))["requests"]
glue("alone_n", n_alone, "{:,}")
# a floor: more miss alone than the goal allows, so no load, however low, reaches it
glue("floor_words", t("7.3.cases.floor" if missed["ib"][-1] > (1 - GOAL) * n_alone else "7.3.cases.no_floor"))

# %% [hide-code]
# the numbers the text below quotes, from the studies above and one scarce-memory run
glue("lowest_per_gpu", min(two["rates"]) / two["gpus"], "{:g}")
glue("highest_per_gpu", max(two["rates"]) / two["gpus"], "{:g}")
for name in ("fair2_artifact", "fair2_tight_decode", "short_tight", "scarce_tight", "fair3_tight", "fair4_tight", "fair4_paper",
             "tp4_tight"):
    glue(f"claim_{name}", fair.claim_words(STUDIES, name))
for name, study in (("three", "fair-3"), ("four", "fair-4")):
    glue(f"{name}_best", fair.describe(fair.best(studies[study], "split", "tight")[0]))
glue("tp_best_co", fair.describe(fair.best(studies["tp-4"], "replicas", "tight")[0]))
glue("tp_best_co_gp", fair.number_words(fair.best(studies["tp-4"], "replicas", "tight")[1]))
glue("four_best_co_gp", fair.number_words(fair.best(studies["fair-4"], "replicas", "tight")[1]))
few = studies["scarce-2"]["run_knobs"]["kv_budget"]
scarce_rate = 2 * studies["scarce-2"]["gpus"]  # 2 requests/s per GPU: past the split's scarce-memory goodput
held = run_deployment(dry, "chapter-7.3-mixed", RunConfig("chunked", dry_run=True, kv_budget=few,
                                                          workload_knobs={"rate": scarce_rate}),
                      DeploymentConfig("disaggregated", prefill_chunk_size="none", decode_batch_size=128))
waits = sorted(tr.start_s - tr.ready_s for tr in held.transfers)
glue("scarce_slots", held.instances[1].num_slots)
glue("few_slabs", few / (held.instances[1].slab_tokens * hw.kv_bytes_per_token), "{:.0f}")
glue("scarce_rate", scarce_rate / 2, "{:g}")
glue("scarce_wait", waits[len(waits) // 2], "{:.1f}")
glue("scarce_wait_max", waits[-1], "{:.1f}")

# %% [markdown]
# * **Where the first token is counted.** DistServe counts TTFT when the prefill GPU makes the first token. vLLM's
#   and Dynamo's prefill/decode setups stream it from the decode GPU, after the transfer; counted there, at the
#   tight targets, {glue}`claim_fair2_tight_decode`. Our decode-side count drops the prefill GPU's token, so a
#   request here is one decode step shorter than under vLLM's setup, whose decode instance makes every token: a
#   small favour to the split.
# * **A slow link.** Over InfiniBand NDR the split's best at the tight targets is {glue}`ib_tight_prefill`
#   requests/s per GPU under DistServe's convention, as over NVLink ({glue}`nv_tight_prefill`): the transfer falls
#   in one gap, which TPOT spreads over every token. Counted at the decode GPU it is {glue}`ib_tight_decode`
#   (NVLink: {glue}`nv_tight_decode`): every TTFT now carries the transfer. Even on an idle GPU,
#   {glue}`ib_alone` of every {glue}`alone_n` requests miss {glue}`art_ttft` ms that way over InfiniBand
#   ({glue}`nv_alone` over NVLink, {glue}`pre_alone` counted at the prefill GPU; the seeds' range); {glue}`floor_words`
# * **Short prompts.** Without long prompts nothing needs keeping apart: {glue}`claim_short_tight`.
# * **Scarce KV.** With KV for {glue}`few_slabs` slabs a GPU the decode GPU holds {glue}`scarce_slots` requests at
#   once. A prompt's K/V then wait on the prefill GPU, still counted there, until the decode GPU has room (at
#   {glue}`scarce_rate` requests/s per GPU on one draw, a median {glue}`scarce_wait` s, at most
#   {glue}`scarce_wait_max` s), and a full prefill GPU takes no new prompt. At the tight targets,
#   {glue}`claim_scarce_tight`.
# * **Three and four GPUs.** The split's best at the tight targets: {glue}`three_best`; {glue}`four_best`.
#   There, three GPUs: {glue}`claim_fair3_tight`; four:
#   {glue}`claim_fair4_tight`. At the paper's, four: {glue}`claim_fair4_paper`.
# * **Chunk 128.** Under the ridge, a 128-token chunk rides almost free beside the decodes, so at loose targets it is
#   the replicas' best. But a long prompt then takes up to {glue}`c128_steps` steps, each streaming the weights
#   again, and {glue}`c128_miss` requests miss {glue}`art_ttft` ms even alone: at the artifact's and the tight
#   targets it scores low, whatever the load.
# * **The model split over GPUs, per phase.** DistServe's main lever is a different parallelism for each phase.
#   With four GPUs as one replica on all four or two replicas of two each, or as splits with a phase on two GPUs,
#   at the tight targets {glue}`claim_tp4_tight`. The best, {glue}`tp_best_co`, reaches {glue}`tp_best_co_gp` against
#   {glue}`four_best_co_gp` for four single-GPU replicas: a model split over several GPUs prefills a long prompt
#   that many times faster, so chunks meet the TTFT target again.
#
# **How far to trust it.** The cost model charges a mixed step its roofline time and nothing for prefill and decode
# getting in each other's way inside a step, which DistServe measured on real GPUs; that would favour the split.
# Each tensor-parallel layer pays two all-reduces over NVLink, each a fixed latency (vLLM's custom all-reduce as
# measured for one decode token's activations) plus the bytes at the link's speed. And a goodput read off a sweep
# moves with the draw: hence the seeds, and no claim that does not hold on all of them.
#
# **Where this sits in the literature.** DistServe (arXiv:2401.09670, January 2024) came after Sarathi's chunked
# prefill (August 2023), DeepSpeed-FastGen (November 2023) and Splitwise (November 2023); only Sarathi-Serve
# (March 2024) came later. One of DistServe's baselines, DeepSpeed-MII, already ran Dynamic SplitFuse, a form of
# chunked prefill. vLLM's own page on disaggregated prefill gives two reasons to split: tuning TTFT and the gap
# between tokens apart (each phase its own parallelism), and control over the tail of that gap; it adds that
# splitting does not raise throughput.
