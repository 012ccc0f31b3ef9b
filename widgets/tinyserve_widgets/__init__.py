"""tinyserve_widgets: views of tinyserve traces for notebooks (ipywidgets + plotly, matplotlib fallback).

    import tinyserve, tinyserve_widgets as tw
    trace = tinyserve.run("chapter-7.1-finisher", policy="static", dry_run=True)
    tw.show(trace)                    # slot timeline, waste meter, step composition, KV, requests, latency
    tw.Explorer("chapter-7.3-long-prompt", policy="chunked")   # knobs that re-run the engine's dry run
    tw.DeploymentExplorer(ttft_ms=1000, tpot_ms=50)   # colocated replicas vs prefill + decode instances, SLOs
    tinyserve.set_language("zh-TW")   # every label, sentence and figure font in 繁體中文 (views on screen redraw)

Every view reads a Trace (tinyserve.trace); nothing here schedules or computes metrics.
"""
from __future__ import annotations

from tinyserve.lang import set_language, t

from .board import ALL_VIEWS, VIEWS, Cursor, TraceView, show
from .deploy_explorer import DeploymentExplorer
from .deployment import DeploymentView, TimeCursor
from .explorer import CONTROLS, Compare, Explorer
from .static import board_figure, set_static_fallback
from .views import BlockView, KVView, LatencyView, RequestView, SlotTimeline, StepComposition, WasteMeter

__all__ = ["show", "TraceView", "Explorer", "Compare", "CONTROLS", "Cursor", "DeploymentView", "DeploymentExplorer",
           "TimeCursor", "VIEWS", "ALL_VIEWS", "SlotTimeline",
           "WasteMeter", "StepComposition", "KVView", "BlockView",
           "LatencyView", "RequestView", "board_figure", "set_static_fallback", "set_language", "t"]
