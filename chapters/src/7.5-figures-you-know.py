# %% [markdown]
# # 7.5 Appendix: the figures you know, run on a real engine
#
# Blog posts, docs pages and papers about batching each draw one picture and stop. This appendix takes five
# of those pictures, writes each one down as a workload file (`chapters/workloads/gallery-*.jsonl`), runs it
# through `tinyserve` and lets you step through what the engine did. Where our policy follows a different rule
# from the system in the picture, we say exactly how and show the difference. Then DistServe's headline figure,
# prefill and decode on shared or on separate GPUs, redrawn on modeled H200s; then the sweeps those papers use
# to compare schedulers: capacity under a latency target, an ablation, and latency distributions.
#
# The descriptions below are ours, not the authors' words; follow the links for the originals.
# Every run is a dry run with fixed output lengths on the modeled clock (a 70B-class model on one H200), so
# every count and time printed here is the same on any machine.

# %%
import matplotlib.pyplot as plt

import tinyserve
tinyserve.set_language("en")
import tinyserve_widgets as tw
from tinyserve.analysis import sweeps
from tinyserve.analysis.batching import kv_used_share
from tinyserve.analysis.figures import iterations, named, story, token_iterations, waiting_on
from tinyserve.analysis import fair
from tinyserve.analysis.goodput import GOAL, parse_spec, run_config
from tinyserve.analysis.prefill import ttft_ms, worst_gap_ms
from tinyserve.core.scheduling.variants import SeparatePrefill, WholePromptBudget
from tinyserve.deploy import run_deployment
from tinyserve.cost.presets import get_preset
from tinyserve.engine import Engine
from tinyserve.lang import ljust, say, t
from tinyserve.lang.glue import glue
from tinyserve_widgets.predict import Choose, Predict, prose

dry = Engine()
tw.set_static_fallback(False)  # each section draws its own static picture below the widgets (for GitHub)


def run(name, policy, **knobs):
    """A gallery workload (chapters/workloads/NAME.jsonl) under a policy, as a dry run."""
    return dry.run(f"workloads/gallery-{name}.jsonl", policy, dry_run=True, progress=False, **knobs)


# %% [hide-code]
# The static pictures of this appendix: drawing only (the cells that print the numbers compute them).
import numpy as np
from matplotlib.ticker import FuncFormatter

from tinyserve_widgets.palette import OKABE_ITO as OI


def timelines(runs: dict, height: float, x: str = "steps", ncols: int = 2):
    """Slot timelines side by side under their titles, one legend below them all; steps counted as the figures
    count iterations, from 1."""
    rows = -(-len(runs) // ncols)
    fig, axes = plt.subplots(rows, ncols, figsize=(9.5, height * rows), squeeze=False)
    legend = {}
    for ax, (name, tr) in zip(axes.flat, runs.items()):
        tw.static.plot_timeline(ax, tr, x=x)
        ax.set_title(name, fontsize=10)
        ax.set_yticks(range(tr.num_slots))  # whole slots only
        if x == "steps":
            ticks = range(0, len(tr.steps), max(1, len(tr.steps) // 12))
            ax.set_xticks(list(ticks), [str(k + 1) for k in ticks])
            ax.set_xlabel(t("7.5.axis.iteration"))
        old = ax.get_legend()
        if old is not None:  # each panel names only what it draws; one legend below them all names the union
            legend.update({txt.get_text(): h for h, txt in zip(old.legend_handles, old.get_texts())})
            old.remove()
    fig.legend(legend.values(), legend.keys(), loc="lower center", ncol=len(legend), fontsize=9, frameon=False)  # words: ok
    plt.tight_layout(rect=(0, 0.35 / (height * rows), 1, 1))


CAP_STYLE = [dict(color=OI["blue"]), dict(color=OI["sky_blue"]), dict(color=OI["black"]),
             dict(color=OI["orange"], hatch="//"), dict(color=OI["vermillion"], hatch="..")]


def capacity_figure(curves, targets):
    """Capacity per P99 target as grouped bars, one bar per setting (equal bars stay side by side, never hidden)."""
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(curves)
    top = max(c.top_rate for c in curves)
    for i, (c, style) in enumerate(zip(curves, CAP_STYLE)):
        xs = [j + (i - (len(curves) - 1) / 2) * width for j in range(len(targets))]
        caps = [c.capacity(ms) for ms in targets]
        ax.bar(xs, [cap or 0 for cap in caps], width, edgecolor="white", label=c.label, **style)
        for x, cap in zip(xs, caps):
            if cap is None:
                word = t("7.5.cap.none")  # upright in Chinese, turned to fit the bar in English
                ax.text(x, 0.3, word, ha="center", va="bottom", fontsize=9, rotation=90 if word.isascii() else 0)
            elif cap == c.top_rate:
                ax.text(x, cap + 0.2, "≥", ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(len(targets)), [f"{ms:g} ms" for ms in targets])
    ax.set_ylim(0, top * 1.12)
    ax.set_xlabel(t("7.5.cap.xlabel"))
    ax.set_ylabel(t("7.5.cap.ylabel"))
    ax.set_title(t("7.5.cap.title"), fontsize=11)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=9, frameon=False)
    plt.tight_layout()


CDF_STYLE = [dict(color=OI["vermillion"], ls="-", lw=2),
             dict(color=OI["blue"], ls="--", lw=2.5),
             dict(color=OI["orange"], ls=":", lw=2.5, marker="o", markevery=0.08, ms=4)]


def cdf_figure(res):
    """TTFT and end-to-end CDFs, one row per load; the lines differ in colour, dash and marker, so two that
    coincide stay visible."""
    loads = sorted({load for load, _ in res})
    labels = list(dict.fromkeys(label for _, label in res))
    fig, axes = plt.subplots(len(loads), 2, figsize=(9, 2.9 * len(loads) + 0.8), squeeze=False)
    for i, load in enumerate(loads):
        for j, key in enumerate(("ttft_s", "e2e_s")):
            ax = axes[i][j]
            for label, style in zip(labels, CDF_STYLE):
                v = res[(load, label)][key]
                ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=label, **style)
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.set_ylim(0, 1.02)
            ax.set_xlabel(t(f"7.5.cdf.{key}"))
            ax.set_ylabel(t("7.5.cdf.share"))
            ax.set_title(t("7.5.cdf.panel", what=t(f"7.5.cdf.what.{key}"), rate=t("7.5.rate", rate=load)), fontsize=10)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=9, frameon=False)
    fig.suptitle(t("7.5.cdf.title"), fontsize=11)
    plt.tight_layout(rect=(0, 0.06, 1, 1))


# %% [markdown]
# ## 1. Anyscale: "How continuous batching enables 23x throughput in LLM inference"
#
# *Cade Daniel, Chen Shen, Eric Liang, Richard Liaw, Anyscale blog, June 2023.*
# <https://www.anyscale.com/blog/continuous-batching-llm-inference>
#
# **What the figure shows.** A grid with four sequences as rows and iterations as columns. With static
# batching, the third sequence is done after two iterations, yet its row stays reserved until the second
# sequence, the slowest, ends at iteration six. With continuous batching the same grid keeps filling: three
# further sequences (S5 to S7) step into rows the moment earlier ones finish.
#
# **Our scenario** (`gallery-anyscale-grid.jsonl`): S1 to S4 with outputs of 5, 6, 2 and 4 tokens (S3 ends
# after 2, S2 after 6, as in the picture; the lengths of S1 and S4 are our choice), and S5 to S7 waiting.
# Iteration 1 is the prefill, which also yields each sequence's first token.
#
# **Predict.** Under static batching with four slots, how many decode tokens will be computed for sequences
# that are already finished?

# %%
p_any = Predict(t("7.5.any.predict"), unit=t("7.5.unit.tokens"), lo=0)
p_any

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_any.after_prediction():
    static = run("anyscale-grid", "static", batch_size=4)
    cont = run("anyscale-grid", "continuous", batch_size=4)
    say("7.5.any.static")
    print(story(static))
    print()
    say("7.5.any.cont")
    print(story(cont))
    print()
    print(p_any.reveal(static.metrics()["wasted_decode_tokens"]))
    its = token_iterations(static)
    say("7.5.any.figure")
    say("7.5.any.engine", s3=its["S3"], until=iterations(static, "S3")[-1],
        thrown=iterations(static, "S3", "wasted"), s2_last=its["S2"][-1])
    slot = dict(zip(cont.request_arrays().ids, cont.request_arrays().slot.tolist()))
    say("7.5.any.engine_cont")
    for r in ("S5", "S6", "S7"):
        was = next(o for o in ("S1", "S2", "S3", "S4") if slot[o] == slot[r])
        say("7.5.any.enters", r=r, it=iterations(cont, r)[0], slot=slot[r], was=was)
        glue(f"any_enters_{r}", iterations(cont, r)[0])
    glue("any_second_from", iterations(static, "S5")[0])  # static's second batch: S5 to S7, to its last iteration
    glue("any_static_last", len(static.steps))
    say("7.5.any.summary", wasted=cont.metrics()["wasted_decode_tokens"], n=len(cont.steps), m=len(static.steps))


# %% [markdown]
# In the static run, `S3:w` in iterations 3 to 6 is the picture's idle row: the engine really computes a token
# there and throws it away. (With seven requests and four slots, static batching also runs S5 to S7 as a second
# batch of three, iterations {glue}`any_second_from` to {glue}`any_static_last`.) Under continuous batching S5
# enters S3's slot at iteration {glue}`any_enters_S5`, S6 takes S4's at {glue}`any_enters_S6` and S7 takes S1's at
# {glue}`any_enters_S7`. One difference from the drawing: its prompts are drawn as tokens in the same grid, while
# our iteration 1 computes each whole prompt in one pass, padded to the longest under static batching (`+pad`).
#
# Step through both runs with the cursor (Play, or drag the step slider; the widgets count steps from 0, so
# iteration *n* is step *n* − 1). The pictures below them number iterations from 1, as the text does.

# %%
tw.show(static, k=2, views=("timeline", "waste", "requests"))

# %%
tw.show(cont, k=2, views=("timeline", "waste", "requests"))

# %%
timelines({t("7.5.any.title.static"): static, t("7.5.any.title.cont"): cont}, height=2.8)

# %% [markdown]
# ## 2. Orca, Figure 3: a finished request is still computed
#
# *Gyeong-In Yu et al., "Orca: A Distributed Serving System for Transformer-Based Generative Models", OSDI 2022.*
#
# **What the figure shows.** Two requests with prompts of equal length run as one batch. The second one
# emits its end token at iteration 2, but because the batch is scheduled as a unit, the engine keeps feeding
# it dummy inputs in iterations 3 and 4 until the first request is done, and nobody can use the result.
#
# **Our scenario** (`gallery-orca-early-finish.jsonl`): x1 and x2 with 2-token prompts; x1 makes 4 tokens,
# x2 makes 2.
#
# **Predict.** Batched as a unit, how many tokens will the engine compute for x2 after it is done?

# %%
p_orca = Predict(t("7.5.orca.predict"), unit=t("7.5.unit.tokens"), lo=0)
p_orca

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_orca.after_prediction():
    static = run("orca-early-finish", "static", batch_size=2)
    cont = run("orca-early-finish", "continuous", batch_size=2)
    say("7.5.orca.static")
    print(story(static))
    say("7.5.orca.cont")
    print(story(cont))
    say("7.5.orca.figure")
    say("7.5.orca.engine", its=token_iterations(static)["x2"], static=iterations(static, "x2", "wasted"),
        cont=iterations(cont, "x2", "wasted"))
    print(p_orca.reveal(len(iterations(static, "x2", "wasted"))))


# %% [markdown]
# Same rule as the figure: our static policy keeps a done member's slot computing (`x2:w`) until the batch
# ends. Orca's answer, iteration-level scheduling, is our continuous policy: x2 leaves after iteration 2.

# %%
tw.show(static, k=2, views=("timeline", "waste"))

# %%
timelines({t("7.5.orca.title.static"): static, t("7.5.orca.title.cont"): cont}, height=2.2)

# %% [markdown]
# ## 3. TensorRT-LLM: "Tuning Max Batch Size and Max Num Tokens"
#
# *NVIDIA TensorRT-LLM documentation, performance tuning guide.*
# <https://nvidia.github.io/TensorRT-LLM/performance/performance-tuning-guide/tuning-max-batch-size-and-max-num-tokens.html>
#
# **What the frames show.** A toy scheduler with room for 4 requests and 12 tokens per iteration. Frame by
# frame: two 5-token prompts take 10 of the 12 tokens, so the next prompt cannot start (the *token budget*
# blocks it); next iteration the two only need one token each, so two more prompts start, and the fifth
# request is blocked by the *batch cap* even though tokens are left; then the first request finishes, is
# evicted, and the fifth takes its place. A last picture shows context chunking: the third prompt's first
# piece could have used the 2 spare tokens of the first iteration.
#
# **Our scenario** (`gallery-trtllm-budget.jsonl`): prompts of 5, 5, 4, 6 and 3 tokens (the page gives only the
# first two; the others are ours), R1 stops after 2 tokens.
#
# **Predict.** Without chunking, how many tokens does the second iteration carry (budget 12)?
#
# **A rule we do not have.** Our `chunked` policy always chunks. To replay the frames without chunking we use
# `WholePromptBudget` from `tinyserve.core.scheduling.variants`: decodes first, then newcomers in arrival order,
# each only if its *whole* prompt fits what is left of the budget.

# %%
p_trt = Predict(t("7.5.trt.predict"), unit=t("7.5.unit.tokens"), lo=0, hi=12)
p_trt

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_trt.after_prediction():
    whole = run("trtllm-budget", WholePromptBudget(batch_size=4, max_batch_tokens=12))
    chunk = run("trtllm-budget", "chunked", batch_size=4, chunk_size=12, max_batch_tokens=12)
    say("7.5.trt.figure")
    say("7.5.trt.engine", r3=waiting_on(whole, 0)["R3"], r5=waiting_on(whole, 1)["R5"],
        r1_its=iterations(whole, "R1"), r5_from=iterations(whole, "R5")[0])
    print()
    say("7.5.trt.whole")
    print(story(whole, last=3))
    say("7.5.trt.tokens", tokens=[s.tokens for s in whole.steps[:3]])
    print()
    say("7.5.trt.chunk")
    print(story(chunk, last=3))
    say("7.5.trt.tokens", tokens=[s.tokens for s in chunk.steps[:3]])
    print(p_trt.reveal(whole.steps[1].tokens))


# %% [markdown]
# Frames 2 to 4 come out as drawn: R3 waits on the budget, R5 on the batch cap, and R5 enters once R1 is
# evicted. With chunking, R3's first 2 tokens fill the spare budget of iteration 1, as the page's last picture
# suggests. One more difference: our chunked policy hands out *slots* first and tokens second, so R4 already
# holds a slot in iteration 1 while computing nothing (its prompt waits on the budget), and R5 is left without
# one; TensorRT-LLM would not have scheduled R4 yet. It changes no token here. (The printout names only what a
# waiting request lacks in that step's tokens, so it reads "token budget" for both.)

# %%
tw.show(chunk, k=0, views=("composition", "requests"))

# %%
timelines({t("7.5.trt.title.whole"): whole, t("7.5.trt.title.chunk"): chunk}, height=2.6)

# %% [markdown]
# ## 4. Sarathi-Serve, Figure 7: generation stalls under four schedulers
#
# *Amey Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI 2024,
# arXiv:2403.02310 (figure numbers as in the arXiv version).*
#
# **What the figure shows.** Two requests, A and B, are generating; after one iteration two new requests, C
# and D, arrive. Four timelines: vLLM runs the newcomers' prefills in iterations of their own, so A and B
# pause; Orca puts the whole prefills into the same iteration as A and B's decodes, which makes that
# iteration long, so A and B still wait; FasterTransformer never pauses A and B but lets C and D wait until A
# and B have left; Sarathi-Serve cuts the prompts into chunks that ride along with A and B's decodes, so
# nobody pauses and the newcomers start early.
#
# **Our scenario** (`gallery-sarathi-stalls.jsonl`): A and B with 32-token prompts and 10 output tokens; C (1,024
# tokens) and D (1,022) arrive at 30 ms, during the first decode iteration. The four schedulers in our engine:
#
# | figure | ours | rule |
# |---|---|---|
# | vLLM | `SeparatePrefill` (tinyserve.core.scheduling.variants) | a step that prefills carries no decode |
# | Orca | `continuous`, prefill-first | whole prompts beside the decodes |
# | FasterTransformer | `static`, batch of 2 | a new batch only after the running one has ended |
# | Sarathi-Serve | `chunked`, 512-token chunks, budget 514 | every decode, then chunks up to the budget |
#
# **Predict.** Under the Orca rule, how long (ms) is A's longest wait between two of its tokens?
# (A decode-only iteration takes about 20 ms.)

# %%
p_sar = Predict(t("7.5.sar.predict"), unit="ms", lo=0)
p_sar

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_sar.after_prediction():
    panels = {
        "vLLM": run("sarathi-stalls", SeparatePrefill(batch_size=4)),
        "Orca": run("sarathi-stalls", "continuous", batch_size=4),
        "FasterTransformer": run("sarathi-stalls", "static", batch_size=2),
        "Sarathi-Serve": run("sarathi-stalls", "chunked", batch_size=4, chunk_size=512, max_batch_tokens=514),
    }


    say("7.5.sar.figure")
    decode_ms = 1e3 * panels["Orca"].steps[1].duration_s  # iteration 2: A and B decoding alone
    say("7.5.sar.engine", ms=decode_ms)
    print()
    for name, trace in panels.items():
        say("7.5.sar.panel", name=name)
        print(story(trace, first=1, last=7))
        say("7.5.sar.gaps", gap=worst_gap_ms(trace, "A"), ttft=ttft_ms(trace, "C"))
        print()
    glue("sarathi_d_chunk", panels["Sarathi-Serve"].timeline("D").chunks[0][2])  # tokens in D's first chunk
    glue("gap_vllm", worst_gap_ms(panels["vLLM"], "A"), "{:.0f}")
    glue("gap_orca", worst_gap_ms(panels["Orca"], "A"), "{:.0f}")
    print(p_sar.reveal(round(worst_gap_ms(panels["Orca"], "A"), 1)))


# %% [markdown]
# Reading the four runs against the figure: the vLLM rule pauses A and B for a whole iteration (`paused`), and
# their gap is that prefill step plus the next decode; Orca's mixed step is just as long, so the stall stays;
# the FasterTransformer rule keeps A's gaps at one decode step but C waits for the whole of A and B; chunked
# prefill keeps A's gap to one 514-token step and still starts C within two steps.
#
# **Where our rule differs from the picture.** Sarathi-Serve's budget counts every token of the step. Ours does
# too, and it fills whatever is left with the *next* prompt's first tokens: with a budget of 514 and three decodes,
# D gets chunks of {glue}`sarathi_d_chunk`, not 512. (Our FasterTransformer stand-in pads D to C's length:
# `+pad2`.)

# %%
tw.show(panels["Sarathi-Serve"], k=2, views=("timeline", "composition"))

# %%
timelines(panels, height=2.4, x="time")

# %% [markdown]
# ## 5. vLLM, Figures 2 and 3: memory reserved for tokens that never come
#
# *Woosuk Kwon et al., "Efficient Memory Management for Large Language Model Serving with PagedAttention",
# SOSP 2023.*
#
# **What the figures show.** Before paging, a serving system set aside KV room for the longest a request
# might become. Figure 3 draws two requests side by side in memory: one that may grow to 2,048 positions
# and one to 512; most of each reservation holds nothing yet (room for future tokens), part of it will never
# hold anything (the request stops early), and gaps between reservations are too small to use. Figure 2
# measures the result: in the systems it compares, only about a fifth to two fifths of KV memory held actual
# token states.
#
# **Predict.** Right after iteration 1, what percentage of the reserved KV holds tokens?
#
# **Our scenario** (`gallery-vllm-reservation.jsonl`): the figure's two prompts as text; A may grow to 2,048
# positions, B to 512. Our engine keeps *one slab per slot*, the layout this chapter ends on: every slot reserves
# the same room from the first step, the server's maximum length ({glue}`slab_tokens` positions on this preset).

# %%
p_kv = Predict(t("7.5.kv.predict"), unit="%", lo=0, hi=100)
p_kv

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_kv.after_prediction():
    kv = run("vllm-reservation", "continuous", batch_size=2)
    say("7.5.kv.figure")
    for k in (0, 100, 480, 1000):
        s = kv.steps[k]
        say("7.5.kv.step", it=k + 1, n=len(s.works), slab=kv.slab_tokens, used=s.kv_used_bytes / s.kv_reserved_bytes)
    glue("slab_tokens", kv.slab_tokens, "{:,}")
    print(p_kv.reveal(round(100 * kv.steps[0].kv_used_bytes / kv.steps[0].kv_reserved_bytes, 1)))


# %% [markdown]
# **Where our layout differs.** The figure reserves 2,048 positions for A and 512 for B. Our slabs are all the same
# size, the server's maximum length, so both slots reserve {glue}`slab_tokens`: more waste inside each reservation,
# but no gaps between reservations, since equal slabs always fit back into each other's place. The KV view shows
# reserved against used at every step; Chapter 8's paging is what closes the gap.

# %%
tw.show(kv, k=480, views=("kv", "requests"))

# %%
fig, ax = plt.subplots(figsize=(6, 2.5))
tw.static.plot_kv(ax, kv, 480)
plt.tight_layout()

# %% [markdown]
# Figure 2's measurement, on real traffic: over a run of `chapter-7.2-longtail`, what share of the reserved KV
# holds tokens (averaged over time)? Once with slabs as long as the model's whole context ({glue}`slab_tokens`
# positions, the figure's "reserve the maximum" system), once with slabs as long as the longest request of this
# run, which a real server cannot know in advance.

# %%
# NBVAL_CHECK_OUTPUT
for key, knobs in (("7.5.kv.share.context", {}), ("7.5.kv.share.longest", {"slab": "longest"})):
    tr = dry.run("chapter-7.2-longtail", "continuous", dry_run=True, progress=False, **knobs)
    say(key, share=kv_used_share(tr))

# %% [markdown]
# ## 6. DistServe, Figure 8: SLO attainment against the request rate
#
# *Yinmin Zhong et al., "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large Language Model
# Serving", OSDI 2024, arXiv:2401.09670.* <https://arxiv.org/abs/2401.09670>
#
# **What the figure shows.** The paper's chatbot workload (ShareGPT conversations on OPT-13B, OPT-66B and
# OPT-175B) in two rows. Top: the share of requests meeting both a TTFT and a TPOT target (*SLO attainment*)
# as the request rate per GPU grows, one curve per system, with a dashed line at 90%; where a curve crosses it
# is that system's *goodput*. Bottom: the rate held still and both targets shrunk together by one factor; the
# smallest factor a curve keeps above 90% is how tight a target that system can hold. DistServe, with prefill
# and decode on separate GPUs, crosses later than the colocated systems; over all its workloads the paper
# reports up to 7.4× the rate, or 12.6× tighter targets, than vLLM and DeepSpeed-MII at more than 90%
# attainment (A100 GPUs; DistServe chose each phase's number of GPUs and parallelism per model).
#
# **Our scenario.** 7.3's section 6 traffic (`chapter-7.3-mixed`: chat turns among 2,000–3,500-token prompts)
# on two modeled H200s, at the paper's targets for OPT-66B, the model nearest ours (TTFT ≤ {glue}`ds_ttft` ms,
# TPOT ≤ {glue}`ds_tpot` ms; 7.3's appendix B gives the source). Three deployments, read off 7.3's sweep of
# {glue}`ds_seeds` draws of the traffic: two replicas with whole prompts beside the decodes (`continuous`: our
# stand-in for the vLLM it measured, whose separate prefill steps stall decodes as long, section 4), two
# replicas with chunks at their best length (`chunked`: DeepSpeed-MII, its other baseline, already cut prompts
# this way, as Dynamic SplitFuse), and a prefill GPU with a decode GPU at their best settings.
#
# **Predict.** Which has the highest goodput per GPU: whole prompts, chunks or the split?

# %%
p_ds = Choose(t("7.5.ds.predict"), {k: t(f"7.5.ds.label.{k}") for k in ("continuous", "chunked", "split")})
p_ds

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_ds.after_prediction():
    STUDIES = fair.load()  # 7.3's deployment sweeps (benchmarks/deployments.py)
    two = STUDIES["studies"]["fair-2"]
    DS_TTFT_MS, DS_TPOT_MS = STUDIES["pairs"]["paper"]  # DistServe's Figure 8, OPT-66B on ShareGPT
    # each deployment's label in the sweep, at each pair: whole prompts, and each side's best there
    ds_labels = {pair: {"continuous": ("replicas", fair.best(two, "replicas", pair, having="chunk_size=none")[0]),
                        "chunked": ("replicas", fair.best(two, "replicas", pair)[0]),
                        "split": ("split", fair.best(two, "split", pair)[0])} for pair in ("paper", "tight")}
    ds_goodput = {pair: {key: fair.goodput(two, side, label, pair) for key, (side, label) in labels.items()}
                  for pair, labels in ds_labels.items()}
    order = list(ds_labels["paper"])
    best_key = max(order, key=lambda k: ds_goodput["paper"][k]["median"] or 0)
    print(p_ds.reveal(best_key, why=t("7.5.ds.why", gaps="; ".join(
        t("7.5.ds.gap", label=t(f"7.5.ds.label.{k}"), value=fair.number_words(ds_goodput["paper"][k]))
        for k in order))))
    say("7.5.ds.head", n=len(two["seeds"]), pct=100 * fair.SETTLED)
    for pair in ("paper", "tight"):
        ttft, tpot = STUDIES["pairs"][pair]
        print(t("figures.fair.pair", name=t(f"figures.fair.pair.{pair}"), ttft=ttft, tpot=tpot))
        for key in order:
            print("  " + ljust(t(f"7.5.ds.label.{key}"), 46) + fair.number_words(ds_goodput[pair][key]))
    glue("ds_ttft", DS_TTFT_MS, "{:,.0f}")
    glue("ds_tpot", DS_TPOT_MS, "{:.0f}")


# %% [hide-code]
glue("ds_seeds", len(STUDIES["studies"]["fair-2"]["seeds"]))
# why the paper's TPOT target never binds here: K/V a token, ours against OPT-66B's (64 layers, d_model 9,216,
# K and V in fp16: the OPT paper's Table 1), and what one decode step alone costs our model
OPT_66B_KV = 2 * 64 * 9216 * 2
ours = get_preset(STUDIES["hardware"])
glue("kv_per_token", ours.kv_bytes_per_token, "{:,.0f}")
glue("opt_kv_per_token", OPT_66B_KV / 1e6, "{:.2f} MB")
glue("kv_ratio", OPT_66B_KV / ours.kv_bytes_per_token, "{:.1f}")
lone = dry.run("chapter-7.3-mixed", "continuous", dry_run=True, progress=False, hardware=STUDIES["hardware"],
               workload_knobs={"n": 1})
glue("plain_step_ms", 1e3 * lone.steps[-1].duration_s, "{:.1f}")
rep_paper = fair.best(STUDIES["studies"]["fair-2"], "replicas", "paper")
glue("tpot_alone", fair.number_words(fair.goodput(STUDIES["studies"]["fair-2"], "replicas", rep_paper[0], "paper",
                                                  kind="tpot")))
glue("rep_sustains", fair.sustains(rep_paper[1]), "{:.3g}")

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_ds.after_prediction():
    # the bottom row: the rate held still, both targets shrunk by one factor, every seed of the sweep
    SCALES = (1, 0.7, 0.5, 0.35, 0.25, 0.2, 0.16, 0.13, 0.1)
    SCALE_RATE = 2  # requests/s for the two GPUs: the bottom row's fixed rate
    ds_scale = {}
    for key, (side, label) in ds_labels["paper"].items():
        for seed in two["seeds"]:
            dc, own = parse_spec(label)
            rc = run_config("chunked", {"dry_run": True, "seed": seed}, own, {"rate": SCALE_RATE})
            fixed = run_deployment(dry, "chapter-7.3-mixed", rc, dc)
            ds_scale[key, seed] = [fixed.slo(DS_TTFT_MS * s, DS_TPOT_MS * s)["attainment"] for s in SCALES]
    tightest = {k: min((s for s, a in zip(SCALES, att) if a >= GOAL), default=None) for k, att in ds_scale.items()}
    say("7.5.ds.scale_head", rate=SCALE_RATE / 2)
    scale_words = {}
    for key in order:
        held = sorted(tightest[key, seed] for seed in two["seeds"])
        words = t("7.5.ds.scale_range", low=held[0], high=held[-1]) if held[0] != held[-1] else f"{held[0]:g}×"
        print("  " + ljust(t(f"7.5.ds.label.{key}"), 46) + words)
        scale_words[key] = words
    # the verdicts in words, hidden with the tables until the learner has predicted
    prose(t("7.5.ds.verdicts", goal=100 * GOAL, chunk=fair.describe(ds_labels["paper"]["chunked"][1]),
            paper=fair.claim_words(STUDIES, "fair2_paper"), paper_whole=fair.claim_words(STUDIES, "fair2_paper_whole"),
            rate=SCALE_RATE / 2, continuous=scale_words["continuous"], chunked=scale_words["chunked"],
            split=scale_words["split"], tight=fair.claim_words(STUDIES, "fair2_tight"),
            tight_whole=fair.claim_words(STUDIES, "fair2_tight_whole")))


# %% [reveal, hide-code]
with p_ds.after_prediction():
    DS_STYLE = {"continuous": dict(color=OI["blue"], ls="-"), "chunked": dict(color=OI["sky_blue"], ls="--"),
                "split": dict(color=OI["vermillion"], ls="-", lw=1.6)}
    fig, ax = plt.subplots(1, 2, figsize=(9.5, 3.8), sharey=True)
    for key in order:
        side, label = ds_labels["paper"][key]
        for i, seed in enumerate(two["seeds"]):
            curve = fair.curve(two, side, label, seed, "paper")  # a curve stops past its saturation
            ax[0].plot([r / 2 for r in two["rates"][:len(curve)]], [100 * a for a in curve],
                       alpha=0.7, label=t(f"7.5.ds.label.{key}") if i == 0 else None, **DS_STYLE[key])
        # the right panel: the seeds' median and their range, so three deployments stay apart at small factors
        per_scale = list(zip(*(ds_scale[key, seed] for seed in two["seeds"])))
        ax[1].plot(SCALES, [100 * sorted(v)[len(v) // 2] for v in per_scale], marker=".", **DS_STYLE[key])
        ax[1].fill_between(SCALES, [100 * min(v) for v in per_scale], [100 * max(v) for v in per_scale],
                           color=DS_STYLE[key]["color"], alpha=0.15, lw=0)
    for a in ax:
        a.axhline(100 * GOAL, color=OI["black"], ls=":", lw=0.8)
        a.set_xscale("log")
        a.minorticks_off()
    ax[0].set_xticks([0.25, 0.5, 1, 2, 4, 8, 15], ["0.25", "0.5", "1", "2", "4", "8", "15"])
    ax[1].set_xticks(SCALES, [f"{s:g}×" for s in SCALES], fontsize=7)
    ax[1].invert_xaxis()  # tighter targets to the right, as in the paper
    ax[0].set(xlabel=t("7.5.ds.fig.rate"), ylabel=t("7.5.ds.fig.attainment"), ylim=(0, 102),
              title=t("7.5.ds.fig.rate_title", ttft=DS_TTFT_MS, tpot=DS_TPOT_MS))
    ax[1].set(xlabel=t("7.5.ds.fig.scale"), title=t("7.5.ds.fig.scale_title", rate=SCALE_RATE / 2))
    fig.suptitle(t("7.5.ds.fig.title"), fontsize=11)
    fig.legend(*ax[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=9, frameon=False)
    plt.tight_layout(rect=(0, 0.07, 1, 1))


# %% [markdown]
# **Where our setting differs.** Our model is a 70B with grouped-query attention: its K/V take
# {glue}`kv_per_token` bytes a token, {glue}`kv_ratio`× less than OPT-66B's {glue}`opt_kv_per_token`, and with FP8
# weights one request's decode step alone takes {glue}`plain_step_ms` ms. A decode batch is cheap here, so the paper's
# TPOT target of {glue}`ds_tpot` ms never binds: on TPOT alone the best replicas would read {glue}`tpot_alone`
# requests/s per GPU, past the {glue}`rep_sustains` they can sustain. Our cost model charges a mixed step only its
# roofline time; the slowdown DistServe measured when prefill and decode share a step on real GPUs is not in it.
# DistServe also gave each phase its own number of GPUs and parallelism; 7.3's appendix B tries both, and where
# the first token is counted.

# %% [markdown]
# ## 7. The sweeps the papers use
#
# ### Capacity under a latency target (Sarathi-Serve, Figure 12)
#
# The paper asks: at most how many requests per second can one replica take while the 99th percentile of
# the time between two tokens stays under a target? It answers for vLLM at three batch caps and for
# Sarathi-Serve at two token budgets, over a range of targets. We do the same on `chapter-7.2-longtail`
# (short chat turns and long retrieval prompts), counting a rate only if it and every lower rate tried meet
# the target, and only while the median wait for a slot stays under 2 s (the paper's rule for a load that
# can be sustained).

# %%
# NBVAL_CHECK_OUTPUT
targets = (50, 100, 200, 400)
curves = sweeps.capacity_sweep(named(sweeps.capacity_settings()), targets_ms=targets, n=100)
# the slots a slab server gets at the largest batch cap of the line-up (the text below the table says why)
widest = max(st.knobs["batch_size"] for st in sweeps.capacity_settings() if st.policy == "continuous")
glue("cap_slots", dry.run("chapter-7.2-longtail", "continuous", batch_size=widest, dry_run=True, progress=False,
                          workload_knobs={"n": 1}).num_slots)
print(sweeps.capacity_table(curves, targets))
cont, small, large = curves[0], curves[-2], curves[-1]  # the line-up: continuous B=32, 64, 128; chunked T=512, 2048
gap = {(c.label, r): g for c in (cont, large) for r, g in zip(c.rates, c.p99_gap_ms)}  # P99 gap (ms) per rate
glue("cont_gap_2", gap[cont.label, 2.0], "{:.0f}")
glue("cont_gap_3", gap[cont.label, 3.0], "{:.0f}")
glue("large_gap_2", gap[large.label, 2.0], "{:.0f}")
glue("small_gap_lo", min(small.p99_gap_ms), "{:.0f}")
glue("small_gap_hi", max(small.p99_gap_ms), "{:.0f}")
glue("small_cap_100", small.capacity(100), "{:g}")
glue("cont_cap_100", cont.capacity(100), "{:g}")
glue("cont_cap_200", cont.capacity(200), "{:g}")
glue("large_cap_50", large.capacity(50), "{:g}")

# %%
capacity_figure(curves, targets)

# %% [markdown]
# The three batch caps give the very same rows, and the reason is memory, not scheduling: with a
# {glue}`slab_tokens`-position slab per slot, the H200's KV memory holds only {glue}`cap_slots` slots, so 64 and
# 128 are capped at {glue}`cap_slots` (the debt Chapter 8's paging pays). Under continuous batching the P99 gap
# is set by the long prompts' prefill steps: {glue}`cont_gap_2` ms at 2 requests/s, where those steps are still
# too rare to reach the slowest percent of gaps, then {glue}`cont_gap_3` ms at 3 requests/s.
#
# The token budget cuts both ways. `chunked T=512` keeps its P99 gap between {glue}`small_gap_lo` and
# {glue}`small_gap_hi` ms at every rate tried, so it meets the 100 and 200 ms targets up to the highest rate tried
# ({glue}`small_cap_100` requests/s), where continuous batching manages {glue}`cont_cap_100` and
# {glue}`cont_cap_200`. That bound is also a floor: at 50 ms, `chunked T=512` meets no rate at all, while
# continuous batching and `chunked T=2048` meet {glue}`large_cap_50` requests/s (their P99 gaps at 2 requests/s:
# {glue}`cont_gap_2` and {glue}`large_gap_2` ms). A small budget buys the middle targets, not the tightest one;
# a large one behaves like no budget at all once prompts are shorter than it (`chunked T=2048` meets the same
# rates as continuous batching). Our stand-in for vLLM mixes prefills with decodes (Orca's rule); in section 4
# its stall was about as long as the vLLM rule's ({glue}`gap_orca` against {glue}`gap_vllm` ms), which pauses
# decodes for the prefill step instead.
#
# ### Mixing, chunking, or both (Sarathi-Serve, Table 4)
#
# The paper's ablation keeps one ingredient at a time. In our policies:
#
# * **mixing alone**: `continuous`, prefill-first: a newcomer's whole prompt runs in the next step beside the
#   decodes;
# * **chunking alone**: `ChunkOnly`: prompts are cut into chunks of at most the budget, but a step carries
#   chunks or decodes, never both; while both wait, the two kinds of step alternate;
# * **both**: `chunked`: every decode, then chunks filling the rest of the same step's budget.
#
# All with a 1,024-token budget and 128 slots, `chapter-7.2-longtail` at 8 requests/s.
#
# **Predict.** Which of the three has the lowest P99 gap: mixing alone, chunking alone, or both?

# %%
p_abl = Choose(t("7.5.abl.predict"), {label: label for label in (t("figures.abl.mixing"), t("figures.abl.chunking"),
                                                                  t("figures.abl.both"))})
p_abl

# %% [reveal]
# NBVAL_CHECK_OUTPUT
with p_abl.after_prediction():
    abl = sweeps.ablation(rate=8.0, budget=1024)
    say("7.5.abl.head")
    for label, m in abl.items():
        print(f"{ljust(label, 16)}{m['p50_ttft_ms']:>10.1f}{m['p99_gap_ms']:>10.1f}")
    gaps = "; ".join(f"{label} {m['p99_gap_ms']:.1f}" for label, m in abl.items())
    print(p_abl.reveal(min(abl, key=lambda label: abl[label]["p99_gap_ms"]), why=t("7.5.abl.why", gaps=gaps)))


# %% [markdown]
# Each ingredient alone fixes one number: mixing keeps first tokens fast but long prompts stall everyone;
# chunking alone bounds the stall but makes newcomers take turns with the decodes. Together they keep both low,
# the paper's finding.
#
# ### Latency distributions at two loads (Anyscale's CDFs)
#
# The Anyscale post compares frameworks by the distribution of latencies at a light and a heavy load. Here:
# request-level batching (`dynamic`: a batch of 32 or whatever came within 100 ms), continuous and chunked, on
# a workload whose output lengths spread around a median of 100 tokens. `spread` is the knob: 0 gives every
# request the same length; larger values widen the tail, and with it the fastest-finisher problem.

# %%
# NBVAL_CHECK_OUTPUT
spread = 1.0  # ▶ try 0.0 and 1.5
res = sweeps.cdfs(loads=(2.0, 6.0), spread=spread, settings=named(sweeps.cdf_settings()))
print(sweeps.cdf_table(res))

# %%
cdf_figure(res)

# %% [markdown]
# The same runs in the widgets' latency view (one line per policy, p50 and p99 marked), with the spread and the
# load as knobs: each move re-runs the three dry runs and redraws.

# %%
import ipywidgets as widgets


def latency_traces(load, spread):
    reqs = sweeps.spread_workload(rate=load, spread=spread)
    return {s.label: sweeps.run(reqs, s) for s in named(sweeps.cdf_settings())}


latency = tw.LatencyView(latency_traces(6.0, spread))
spread_knob = widgets.FloatSlider(value=spread, min=0.0, max=2.0, step=0.25, description=t("7.5.knob.spread"))
load_knob = widgets.ToggleButtons(options=[(t("7.5.rate", rate=r), r) for r in (2.0, 6.0)], value=6.0, description=t("7.5.knob.load"))


def redraw(_=None):
    latency.set_traces(latency_traces(load_knob.value, spread_knob.value))


spread_knob.observe(redraw, names="value")
load_knob.observe(redraw, names="value")
widgets.VBox([widgets.HBox([spread_knob, load_knob]), latency.widget])

# %% [markdown]
# ## What to remember
#
# * Each picture comes back on the engine as drawn, and where our rule differs (one pass per prompt, equal slabs,
#   a budget filled with the next prompt's first tokens) the run shows by how much.
# * Static batching keeps a finished sequence's slot computing until its batch ends; continuous batching hands
#   the slot on at the next iteration.
# * A prefill step stalls every decode in flight whether it runs alone (vLLM) or mixed in (Orca); chunks bound
#   the stall, and the token budget that bounds it is also its floor.
# * Under slabs, memory binds before the batch cap does.
# * DistServe's curves keep their shape here, and their order only where both targets are tight, with TTFT counted
#   at the prefill GPU and one GPU a phase (7.3's appendix B): what the split wins depends on the targets, on what a
#   mixed step costs, and on how many GPUs each phase gets.
#
# ## Questions
#
# 1. In the Anyscale grid, which iterations compute tokens for S3 after it is done, and why does continuous
#    batching compute none?
# 2. In the TensorRT-LLM frames, which limit keeps R3 out of iteration 1 and which keeps R5 out of iteration 2?
#    Which of the two does context chunking relax?
# 3. Why is A's longest gap about the same under the vLLM rule and the Orca rule, although only one of them
#    lets A compute during the prefill step?
# 4. What does FasterTransformer's rule give up to keep A's gaps short?
# 5. Our slabs are all the same size. Which kind of memory waste from the vLLM paper's Figure 3 can that layout
#    not have, and which does it make worse?
# 6. Why does raising the batch cap barely change continuous batching's capacity under a tight P99 target?
# 7. In the ablation, which ingredient lowers the P99 gap and which keeps TTFT low?
# 8. Why does DistServe's order come back only when both targets are tight?
