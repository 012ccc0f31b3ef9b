# %% [markdown]
# # 7.0 Why batching
#
# **What you will see**: a tiny language model writing text one token per step; what a step costs when it
# serves 1 … 64 sequences at once, measured on *your* machine; the same question for a 70-billion-parameter
# model on an NVIDIA H200, with the picture that explains the answer (the *roofline*); and a scheduler that
# decides *again at every step* who is in the batch.
#
# Every number comes from the engine `tinyserve` running here. *Modeled* cells use a stated cost model of
# real hardware and print the same numbers everywhere; *measured* cells use your clock.
#
# Plotting code is collapsed (View → Expand All Code); an answer stays closed under its hint until you predict and
# run its cell again, or click it open.

# %%
import tinyserve
tinyserve.set_language("en")
from tinyserve.lang import say, t
from tinyserve.lang.glue import glue

# ▶ CHAPTER_SCALE: False keeps every cell to a few seconds on a laptop; True measures larger batches.
CHAPTER_SCALE = False

engine = tinyserve.shared_engine()  # loads the shipped checkpoint once
model = engine.model
cfg = model.config
say("7.0.model", params=model.num_params(), layers=cfg.n_layer, width=cfg.n_embd, context=cfg.n_positions,
    vocab=cfg.vocab_size)
glue("tiny_weights_mb", sum(p.numel() * p.element_size() for p in model.parameters()) / 1e6, "{:.0f}")

# %% [markdown]
# ## 1. One token per forward pass
#
# The model was trained on Python code; it continues a function greedily, byte by byte. Reading the prompt,
# all of its tokens in one pass, is the **prefill**. Each new token then costs one more pass through all the
# weights: a **decode step**.

# %%
# NBVAL_IGNORE_OUTPUT
# (float32 text can differ between CPUs)
from tinyserve.core.tokenizer import decode, encode

prompt = encode("def fibonacci(n):\n")  # words: ok (a prompt for the model, not prose)
out = model.generate(prompt, max_new_tokens=120)
print(decode(prompt) + decode(out))

# %% [markdown]
# ## 2. What does a wider step cost? — measured here
#
# Now the engine decodes `B` sequences side by side, one token each *in the same forward pass*, timed on
# the wall clock.
#
# **Predict first.** If a step for one sequence takes *t* ms, how long does a step for 32 sequences take:
# about 32·*t*, or much less? Give a multiple of *t*.

# %%
from tinyserve_widgets.predict import Predict

p_wide = Predict(t("7.0.predict.wide"), unit="×", lo=0)
p_wide

# %%
import numpy as np
from tinyserve.core.request import Request
from tinyserve.core.workloads import make_prompt


def decode_step_ms(batch: int, new_tokens: int = 24) -> float:
    """Wall time (ms) of the engine's fastest decode step with `batch` sequences in flight (the step least
    disturbed by other programs on this machine)."""
    reqs = [Request(f"s{i}", make_prompt(64, seed=i), new_tokens, ignore_eos=True)
            for i in range(batch)]
    tr = engine.run(reqs, "continuous", batch_size=batch, clock="wall", progress=False)
    decodes = [s.measured_s for s in tr.steps if all(w.phase == "decode" for w in s.works)]
    return 1e3 * float(np.min(decodes))


batches = [1, 2, 4, 8, 16, 32, 64] + ([128, 256] if CHAPTER_SCALE else [])
decode_step_ms(8)  # warm-up: the first runs pay for memory allocation and kernel selection
measured = {b: decode_step_ms(b) for b in batches}

# %% [reveal]
# NBVAL_IGNORE_OUTPUT
# (wall clock: your machine, your numbers)
with p_wide.after_prediction():
    t1 = measured[1]
    for b, ms in measured.items():
        say("7.0.measured_row", b=b, ms=ms, ratio=ms / t1, per_token=ms / b)
    print()
    b_max = max(batches)
    glue("cpu_bmax", b_max)  # a count: the wall-clock numbers stay in the table, which differs between machines
    print(p_wide.reveal(round(measured[32] / t1, 2)))


# %% [reveal, hide-code]
# NBVAL_IGNORE_OUTPUT
# (a picture of the measured numbers)
with p_wide.after_prediction():
    import matplotlib.pyplot as plt
    from tinyserve_widgets.palette import OKABE_ITO

    fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
    ax[0].plot(batches, [measured[b] for b in batches], "o-", color=OKABE_ITO["blue"])
    ax[0].set(ylabel=t("7.0.y_step_ms"), title=t("7.0.title_step_measured"), ylim=(0, None))
    ax[1].plot(batches, [measured[b] / b for b in batches], "s-", color=OKABE_ITO["orange"])
    ax[1].set(ylabel=t("7.0.y_token_ms"), title=t("7.0.title_token_measured"), ylim=(0, None))
    for a in ax:
        a.set(xscale="log", xlabel=t("7.0.x_batch"))
        a.set_xticks(batches, [str(b) for b in batches])
        a.minorticks_off()
    plt.tight_layout()


# %% [markdown]
# Read the table above, your machine's own: from B = 1 to B = {glue}`cpu_bmax` the step grows far more slowly than
# the batch, so each token gets cheaper. Section 3 shows why a big model's GPU differs.

# %% [markdown]
# ## 3. The same question for a 70B model on an H200 — modeled
#
# A Llama-3-70B-class model with 8-bit weights on one H200 streams all ~{glue}`weights_gb` GB of weights from memory
# into the compute units at every step, whatever the batch. The cost model prices a step's parts:
#
# * **linear layers**: the longer of *streaming the weights once* (bytes ÷ memory bandwidth) and *the
#   arithmetic* (2 flops per parameter per token ÷ arithmetic rate);
# * **attention**: each sequence reads its own **KV cache** — the keys and values the model stored for every
#   earlier token of that sequence, so that a decode step looks them up instead of recomputing them;
# * a fixed **overhead** per step.
#
# A **roofline** compares the two times of the linear layers: moving the bytes, and doing the arithmetic. While
# moving bytes takes longer, the step is *memory-bound* and extra tokens ride along in its shadow; past the
# **ridge**, where the two are equal, it is *compute-bound* and every extra token adds time.
#
# **Why trust modeled numbers?** The rates come from NVIDIA's published datasheet and the model's published shape,
# with every efficiency assumption stated. The same kind of model, fitted to a CPU like this one (`cpu-tiny`, timed
# with one thread), predicts the real engine's one-thread total time within {glue}`total_goal_pct`% on every
# chapter workload; sources and that check: [7.6 Evidence](7.6-appendix-evidence.ipynb).

# %%
from tinyserve.cost.clock import ModeledClock
from tinyserve.lang import wrap
from tinyserve.tools.validate import GOAL_TOTAL_PCT

clock = ModeledClock("h200-70b-fp8")
hw = clock.hardware
print(hw.text("description"))
say("7.0.hw_rates", gb=hw.weight_bytes / 1e9, tbs=hw.bandwidth_Bps / 1e12, tflops=hw.peak_flops / 1e12)
say("7.0.hw_overhead", ms=hw.overhead_s * 1e3)
glue("weights_gb", hw.weight_bytes / 1e9, "{:.0f}")
glue("total_goal_pct", GOAL_TOTAL_PCT, "{:.0f}")  # the goal the validation table of 7.6 checks (tools/validate)
say("7.0.sources")
for s in hw.text("sources")[:2]:
    print(" - " + "\n   ".join(wrap(s, 89)))  # breaks only at spaces: URLs kept whole
say("7.0.one_step", ms=1e3 * clock.decode_step_time(1, 512))

# %% [markdown]
# **Predict.** One sequence's decode step takes the time printed on the last line. How wide can the batch
# get before the step takes twice as long?

# %%
p_knee = Predict(t("7.0.predict.knee"), unit=t("7.0.unit.sequences"), lo=1)
p_knee

# %%
from tinyserve.analysis.prefill import ridge_tokens, weight_stream_s
from tinyserve.core.request import decode_works

CONTEXT = 512  # every sequence attends to 512 earlier tokens
model_batches = [1, 2, 4, 8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024]
step_ms = {b: 1e3 * clock.step_time(decode_works([CONTEXT] * b)) for b in model_batches}
bound = {b: clock.cost(decode_works([CONTEXT] * b))["bound"] for b in model_batches}
ridge = ridge_tokens(hw)
glue("ridge", ridge, "{:.0f}")

# %% [reveal]
# NBVAL_CHECK_OUTPUT
# (modeled: the same on every machine)
with p_knee.after_prediction():
    one = step_ms[1]
    for b in (1, 8, 32, 64, 128, 256, 512):
        say("7.0.modeled_row", b=b, ms=step_ms[b], ratio=step_ms[b] / one, per_token=step_ms[b] / b,
            bound=t(f"7.0.bound.{bound[b]}"))
    knee = next(b for b in range(1, 4097)
                if clock.cost(decode_works([CONTEXT] * b))["bound"] == "compute")
    print()
    say("7.0.chapter_claim")
    say("7.0.engine_claim", ratio=step_ms[64] / one, cheaper=one / (step_ms[64] / 64))
    say("7.0.ridge", ms=weight_stream_s(hw) * 1e3, tokens=ridge, last=knee - 1, knee=knee)
    doubled = next(b for b in range(1, 4097) if clock.decode_step_time(b, CONTEXT) >= 2 * one / 1e3)
    say("7.0.doubled", b=doubled)
    at_ridge = int(ridge)  # the widest step still memory-bound
    glue("per_token_fall", one / (1e3 * clock.decode_step_time(at_ridge, CONTEXT) / at_ridge), "{:.0f}")
    glue("ratio128", step_ms[128] / one, "{:.2f}")
    print(p_knee.reveal(doubled))


# %% [reveal, hide-code]
with p_knee.after_prediction():
    from tinyserve.analysis.prefill import achieved_flops, intensity

    BLUE, ORANGE, VERMILLION, GREY = OKABE_ITO["blue"], OKABE_ITO["orange"], OKABE_ITO["vermillion"], "#999999"
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
    xs = np.arange(1, 1025)
    ts = [1e3 * clock.decode_step_time(int(b), CONTEXT) for b in xs]
    ax[0].plot(xs, ts, color=BLUE)
    ax[0].axvline(ridge, ls="--", color=GREY)
    ax[0].text(ridge * 1.1, max(ts) * 0.85, t("7.0.ridge_label", tokens=ridge), fontsize=9)
    ax[0].set(xscale="log", xlabel=t("7.0.x_batch"), ylabel=t("7.0.y_step_modeled"),
              title=t("7.0.title_step_70b"), ylim=(0, None))
    # the roofline: useful arithmetic rate of the linear layers against tokens per step (flops per weight byte)
    tflops = [achieved_flops(clock, int(b)) / 1e12 for b in xs]
    ax[1].plot(xs, tflops, color=BLUE, lw=2, label=t("7.0.legend.reached"))
    ax[1].plot(xs, hw.bandwidth_Bps * intensity(hw, xs) / 1e12, ":", color=ORANGE,
               label=t("7.0.legend.memory_roof"))
    ax[1].axhline(hw.peak_flops / 1e12, ls="--", color=VERMILLION, label=t("7.0.legend.arithmetic_roof"))
    ax[1].axvline(ridge, ls="--", color=GREY)
    for b in (1, 8, 64, 512):
        ax[1].plot(b, achieved_flops(clock, b) / 1e12, "o", color="k", ms=4)
        ax[1].annotate(f"B={b}", (b, achieved_flops(clock, b) / 1e12), textcoords="offset points",  # words: ok
                       xytext=(4, -11), fontsize=9)
    ax[1].set(xscale="log", yscale="log", ylim=(1, 5000),
              xlabel=t("7.0.x_roofline"), ylabel=t("7.0.y_roofline"), title=t("7.0.title_roofline"))
    ax[1].set_yticks([1, 10, 100, 1000], ["1", "10", "100", "1,000"])
    ax[1].legend(fontsize=9, loc="lower right", frameon=False)  # words: ok (a matplotlib location)
    for a in ax:
        a.set_xticks([1, 4, 16, 64, 256, 1024], ["1", "4", "16", "64", "256", "1024"])
        a.minorticks_off()
    plt.tight_layout()


# %% [markdown]
# Left: the step time stays nearly flat while the weights dominate ({glue}`ratio128`× at B = 128). Right, as a roofline: a narrow step reaches a
# sliver of the GPU's arithmetic because it waits for the weights (the sloped roof); each extra sequence raises
# the useful rate for free until the ridge, where it meets the flat roof. Per token, the cost falls
# {glue}`per_token_fall`-fold between B = 1 and the ridge: the economic case for batching.
#
# Your CPU's curve rose sooner: the tiny GPT's {glue}`tiny_weights_mb` MB of weights stay in the CPU's caches, so
# there is little streaming to share, and a CPU has little spare arithmetic.

# %% [markdown]
# ## 4. Batching gives the same answer
#
# Sharing a step must not change what any sequence generates. Four prompts in 64-bit floating point, each
# alone, then all four in one batch:

# %%
model64 = tinyserve.shared_engine(dtype="float64").model
prompts = [make_prompt(n, seed=n) for n in (12, 40, 7, 25)]
alone = [model64.generate(p, max_new_tokens=16, stop_at_eos=False) for p in prompts]
batched = [Request(f"p{i}", p, 16, ignore_eos=True) for i, p in enumerate(prompts)]
together = tinyserve.run(batched,
                         "continuous", dtype="float64", progress=False)

# %%
# NBVAL_CHECK_OUTPUT
same = [together.request(f"p{i}").output == alone[i] for i in range(4)]
say("7.0.identical", n=sum(same), of=len(same))
say("7.0.shared_steps", n=len(together.steps))

# %% [markdown]
# ## 5. "Batch" is a decision, taken every step
#
# A naive server forms a batch once and keeps it until everyone is done. The engine can decide again before
# *every* step (`run.step()` advances it one step). Three requests arrive at different (modeled) times:

# %%
reqs = [Request("A", make_prompt(20, seed=1), 4, arrival_s=0.00, ignore_eos=True),
        Request("B", make_prompt(30, seed=2), 6, arrival_s=0.03, ignore_eos=True),
        Request("C", make_prompt(10, seed=3), 3, arrival_s=0.07, ignore_eos=True)]
run = engine.start(reqs, "continuous", batch_size=4)

# %%
# NBVAL_CHECK_OUTPUT
# (modeled clock: same on every machine)
while not run.done:
    st = run.step()
    if st is None:
        continue  # nothing to do until the next arrival: the clock jumps ahead
    what = ", ".join(f"{w.request_id} {w.phase}" + (f"×{w.tokens}" if w.tokens > 1 else "")
                     for w in st.works)
    say("7.0.step_row", i=st.index, ms=st.start_s * 1e3, what=what)

# %% [markdown]
# Requests join and leave without the others waiting for them. 7.1 shows what happens when the batch is *not*
# re-decided; 7.2 shows it at full size.

# %% [markdown]
# ## What to remember
#
# * A decode step makes one token per sequence and must stream all the weights to do it. On a GPU serving a
#   big model that streaming dominates, so one step serves many sequences for nearly the price of one.
# * The roofline: a step is memory-bound until its tokens' arithmetic outlasts the weight stream (the ridge,
#   ~{glue}`ridge` tokens here); below it extra tokens are nearly free, past it each one adds time.
# * Batching never changes the tokens each sequence gets.
# * Batching is a decision the scheduler can retake before every step.
#
# ## Questions
#
# 1. Why does a 70B model's decode step take about the same time for 1 and for 64 sequences?
# 2. What two quantities does the roofline compare, and which one wins for small batches?
# 3. Your CPU's curve and the H200 curve have different shapes. What about the tiny model explains it?
# 4. Roughly how many tokens per second does the modeled 70B make at B = 1, and at B = 256?
# 5. What would have to be true of a step for the scheduler to change its batch between two steps?
