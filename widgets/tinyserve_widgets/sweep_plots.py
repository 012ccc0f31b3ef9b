"""Static pictures of the papers' sweeps (tinyserve.analysis.sweeps computes them; this module only draws)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from tinyserve.analysis.sweeps import MAX_QUEUE_S, CapacityCurve
from tinyserve.lang import t

from .static import SMALL_PT


def plot_capacity(curves: list[CapacityCurve], targets_ms, ax=None, max_queue_s: float = MAX_QUEUE_S):
    """Capacity vs P99 target, one line per setting; missing points are named on the figure, not left blank."""
    ax = ax or plt.subplots(figsize=(6, 3.5))[1]
    missing = []
    for c in curves:
        caps = [c.capacity(ms, max_queue_s) for ms in targets_ms]
        xs = [ms for ms, x in zip(targets_ms, caps) if x is not None]
        ys = [x for x in caps if x is not None]
        ax.plot(xs, ys, marker="o", label=c.label)
        missing += [f"{c.label} @ {ms:g} ms" for ms, x in zip(targets_ms, caps) if x is None]
    if missing:
        ax.text(0.01, 0.98, t("sweep_plots.no_rate", missing=t("widgets.join.clause").join(missing)),
                transform=ax.transAxes, va="top", fontsize=SMALL_PT, wrap=True)
    ax.set_xscale("log")
    ax.set_xlabel(t("sweep_plots.target"))
    ax.set_ylabel(t("sweep_plots.capacity"))
    ax.legend(fontsize=SMALL_PT)
    return ax


def plot_cdfs(result: dict[tuple[float, str], dict[str, np.ndarray]], axes=None):
    """TTFT and end-to-end CDFs, one column per metric, one row per load."""
    loads = sorted({k[0] for k in result})
    if axes is None:
        axes = plt.subplots(len(loads), 2, figsize=(9, 2.8 * len(loads)), squeeze=False)[1]
    for i, load in enumerate(loads):
        for j, key in enumerate(("ttft_s", "e2e_s")):
            ax = axes[i][j]
            for (ld, label), d in result.items():
                if ld == load:
                    v = d[key]
                    ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=label)
            ax.set_xscale("log")
            ax.set_xlabel(t("sweep_plots.ttft" if key == "ttft_s" else "sweep_plots.e2e"))
            ax.set_ylabel(t("sweep_plots.fraction", load=load))
        axes[i][0].legend(fontsize=SMALL_PT)
    return axes
