"""The widgets' words live in tinyserve's one language table (catalog tinyserve/locale/widgets.pot): a widget
looks a key up with tinyserve.lang.t and names a policy with tinyserve.analysis.figures.policy_name (one naming
for figures and widgets). This module holds only the labels the widgets compose from a trace.

    import tinyserve
    tinyserve.set_language("zh-TW")        # every view, sentence and figure font drawn after this is in 繁體中文
    from tinyserve.lang import t
    t("waste.sentence.wasted", wasted=31, slots=32)
"""
from __future__ import annotations

from tinyserve.lang import t

__all__ = ["layout_name", "workload_label"]

LAYOUT_NAMES = ("slab", "paged")  # kv_layout


WORKLOAD_KNOBS = ("n", "rate")  # workload knobs with a name of their own on screen (the others: their code name)


def workload_label(trace) -> str:
    """A trace's workload as a title names it, in the reader's language: trace.workload_label() in English
    ('chapter-7.2-longtail (n=20, rate=0.5)'); in zh-TW the knobs named (請求數 20、到達率 0.5) and a list of the
    caller's own requests called so, not 'custom'."""
    name = t("widgets.workload.custom") if trace.workload == "custom" else trace.workload
    knobs = [t("widgets.workload.knob", knob=t(f"widgets.workload.knob.{k}") if k in WORKLOAD_KNOBS else k,
               value=f"{v:g}" if isinstance(v, float) else v) for k, v in trace.workload_knobs.items()]
    return t("widgets.workload.label", name=name, knobs=t("widgets.join.list").join(knobs)) if knobs else name


def layout_name(layout: str) -> str:
    """A KV layout as the reader's language names it ('paged' -> 區塊 in zh-TW; 'slab' stays slab)."""
    return t(f"widgets.layout.{layout}") if layout in LAYOUT_NAMES else layout
