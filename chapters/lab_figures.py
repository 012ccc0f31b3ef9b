"""Static (matplotlib) pictures of a Trace for the chapter notebooks: they draw what the Trace recorded, nothing
is scheduled or counted here. The committed notebooks show these PNGs where no kernel runs (GitHub, nbviewer)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

# one colour per phase, the same in every notebook
PHASE_COLORS = {"idle": "#eeeeee", "prefill": "#4c78a8", "padding": "#bab0ac", "decode": "#59a14f",
                "wasted": "#e15759"}
CODES = list(PHASE_COLORS)


def slot_timeline(trace, ax=None, title: str | None = None, steps: slice | None = None, time_axis: bool = False):
    """Slots (rows) x steps (columns), coloured by what each slot computed in that step."""
    grid = trace.slot_phases()
    codes = np.vectorize(CODES.index)(grid) if grid.size else np.zeros((trace.num_slots, 0), int)
    first = 0
    if steps is not None:
        first = steps.start or 0
        codes = codes[:, steps]
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.12 * trace.num_slots + 1.2))
    extent = None
    if time_axis and trace.steps:
        sl = trace.steps[steps] if steps is not None else trace.steps
        extent = [sl[0].start_s, sl[-1].start_s + sl[-1].duration_s, trace.num_slots - 0.5, -0.5]
    ax.imshow(codes, aspect="auto", interpolation="nearest", cmap=ListedColormap(list(PHASE_COLORS.values())),
              vmin=0, vmax=len(CODES) - 1, extent=extent if time_axis else
              [first - 0.5, first + codes.shape[1] - 0.5, trace.num_slots - 0.5, -0.5])
    ax.set_ylabel("slot")
    ax.set_xlabel("time (s, modeled)" if time_axis else "step")
    used = set(np.unique(codes).tolist())
    ax.legend(handles=[Patch(color=PHASE_COLORS[p], label=p) for i, p in enumerate(CODES) if i in used],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_title(title or f"{trace.policy}: {trace.workload}", fontsize=10)
    return ax


def step_composition(trace, ax=None, title: str | None = None, steps: slice | None = None):
    """Tokens each step computed, split into decode and prefill tokens, with the step's duration on a second axis."""
    sl = trace.steps[steps] if steps is not None else trace.steps
    idx = [s.index for s in sl]
    dec = [sum(w.tokens for w in s.works if w.phase in ("decode", "wasted")) for s in sl]
    pre = [sum(w.tokens + w.padding for w in s.works if w.phase == "prefill") for s in sl]
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 3))
    ax.bar(idx, dec, width=1.0, color=PHASE_COLORS["decode"], label="decode tokens")
    ax.bar(idx, pre, width=1.0, bottom=dec, color=PHASE_COLORS["prefill"], label="prefill tokens")
    ax.set_yscale("symlog", linthresh=64)
    ax.set_xlabel("step")
    ax.set_ylabel("tokens in the step")
    ax2 = ax.twinx()
    ax2.plot(idx, [s.duration_s * 1e3 for s in sl], color="black", lw=1, label="step time (ms)")
    ax2.set_ylabel(f"step time (ms, {trace.clock})")
    ax2.set_ylim(bottom=0)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper right", fontsize=8)
    ax.set_title(title or f"{trace.policy}: what each step computed", fontsize=10)
    return ax
