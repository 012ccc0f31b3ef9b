"""The deployment view and explorer: one row block per instance with its label, every K/V transfer drawn from its
prefill block to its decode block, one cursor in time on every instance, knobs that re-run the deployment, the
numbers (checked against the requests by hand), and the words in 繁體中文."""
from __future__ import annotations

import re
import time

import numpy as np
import pytest

import tinyserve_widgets as tw
from tinyserve.core.config import RunConfig
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.engine import Engine
from tinyserve_widgets import views as V
from tinyserve_widgets.deployment import deployment_figure

CJK = re.compile(r"[\u4e00-\u9fff]")
KNOBS = {"n": 30, "rate": 6.0}  # chapter-7.3-mixed: every output is 8+ tokens, so every request is handed off


def deploy(kind="disaggregated", knobs=KNOBS, **shape):
    rc = RunConfig("chunked", chunk_size=512, dry_run=True, hardware="h200-70b-fp8", workload_knobs=knobs)
    return run_deployment(Engine(), "chapter-7.3-mixed", rc, DeploymentConfig(kind, **shape))


@pytest.fixture(scope="module")
def split():
    return deploy(prefill_instances=2, decode_instances=1)


def heatmaps(view):
    return [tr for tr in view.fig.data if tr.type == "heatmap" and tr.visible is not False]


def transfer_line(view):
    (line,) = [tr for tr in view.fig.data if tr.type == "scatter" and tr.mode == "lines+markers"]
    return line


def runs(x: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of finite points (a NaN breaks a line)."""
    out, start = [], None
    for i, v in enumerate(list(x) + [np.nan]):
        if not np.isnan(v) and start is None:
            start = i
        elif np.isnan(v) and start is not None:
            out.append((start, i))
            start = None
    return out


def step_times(trace):
    return [(s.start_s, s.start_s + s.duration_s) for s in trace.steps]


def test_one_row_block_per_instance_labelled_and_placed_in_time(split):
    view = tw.DeploymentView(split)
    hms = heatmaps(view)
    assert len(hms) == 3
    assert tuple(view.fig.layout.yaxis.ticktext) == ("prefill 0", "prefill 1", "decode 0")
    spans = [(V.values(h.y).min(), V.values(h.y).max()) for h in hms]
    # each block's rows: its slots up to the last one a step used (of batch_size's default 32; the rest stayed
    # idle the whole run), found here from the step records
    used = [1 + max(w.slot for s in inst.steps for w in s.works)
            for inst in split.instances]
    assert [len(V.values(h.y)) - 1 for h in hms] == used and max(used) < 32 and all(u >= 1 for u in used)
    assert [b.num_slots for b in view.blocks] == [32, 32, 32]
    tall = max(b - a for a, b in spans)
    assert all(b - a >= 0.5 * tall - 1e-9 for a, b in spans)  # a block of few rows is drawn taller
    assert all(spans[i][1] < spans[i + 1][0] for i in range(2))  # top to bottom, not overlapping
    note = view.fig.layout.annotations[1].text
    assert all(f"{b.label} slots {u}" in note for b, u in zip(view.blocks, used))  # the rows not drawn, said
    for h, inst in zip(hms, split.instances):  # each instance's steps where they ran, in seconds
        x = V.values(h.x)
        times = step_times(inst)
        assert x.min() == pytest.approx(times[0][0]) and x.max() == pytest.approx(times[-1][1])
    ticks = list(view.fig.layout.yaxis.tickvals)
    assert all(a < tick < b for (a, b), tick in zip(spans, ticks))
    colo = tw.DeploymentView(deploy("colocated", replicas=2))
    assert tuple(colo.fig.layout.yaxis.ticktext) == ("replica 0", "replica 1")
    assert runs(V.values(transfer_line(colo).x)) == []


def test_every_transfer_drawn_from_its_prefill_block_to_its_decode_block(split):
    view = tw.DeploymentView(split)
    line = transfer_line(view)
    x, y = V.values(line.x), V.values(line.y)
    drawn = runs(x)
    assert len(drawn) == len(split.transfers) == KNOBS["n"]
    bottoms = [V.values(h.y).max() for h in heatmaps(view)]
    tops = [V.values(h.y).min() for h in heatmaps(view)]
    for (a, b), tr in zip(drawn, split.transfers):
        assert x[a] == pytest.approx(tr.ready_s) and x[b - 1] == pytest.approx(tr.end_s)
        assert y[a] == bottoms[tr.src] and y[b - 1] == tops[tr.dst]
        assert tr.request_id in line.text[a] and "MB" in line.text[a]
    assert view.drawn_transfers == len(split.transfers)
    fig = deployment_figure(split, 1.0)  # the static picture draws the same lines
    (lines,) = fig.axes[0].collections[-1:]
    assert len(lines.get_segments()) == len(split.transfers)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["prefill 0", "prefill 1", "decode 0"]


def test_the_cursor_marks_the_same_moment_on_every_instance(split):
    view = tw.DeploymentView(split)
    # a moment inside a step of every instance: the middle of decode 0's first step that overlaps one of each
    # prefill instance's steps (found by walking the step records, not through the view)
    busy = [step_times(inst) for inst in split.instances]
    when = next(m for a, b in busy[2] for m in [(a + b) / 2]
                if all(any(s <= m < e for s, e in steps) for steps in busy[:2]))
    view.cursor.value = when  # the slider, as a learner moves it
    assert view.time == pytest.approx(when)
    line = view.fig.layout.shapes[0]
    assert line.x0 == line.x1 == pytest.approx(when)
    for i, (steps, h) in enumerate(zip(busy, heatmaps(view))):
        frame = view.frame(i)
        s, e = next((s, e) for s, e in steps if s <= when < e)
        assert frame.visible and frame.x0 == pytest.approx(s) and frame.x1 == pytest.approx(e)
        assert (frame.y0, frame.y1) == (V.values(h.y).min(), V.values(h.y).max())
    assert view.words.value.count("runs step") == 3
    late = max(e for steps in busy for _, e in steps) + 1.0  # after the last step: every instance idle
    view.set_time(late)
    assert not any(view.frame(i).visible for i in range(3))
    assert view.words.value.count("is idle") == 3


def by_hand(dt, ttft_ms, tpot_ms) -> float:
    """Share of requests that finished with TTFT <= ttft_ms and TPOT <= tpot_ms (vLLM's TPOT)."""
    ok = 0
    for r in dt.requests:
        if r.status != "finished":
            continue
        ttft = (r.token_times[0] - r.arrival_s) * 1e3
        n = len(r.token_times)
        tpot = (r.token_times[-1] - r.token_times[0]) * 1e3 / (n - 1) if n > 1 else 0.0
        ok += ttft <= ttft_ms and tpot <= tpot_ms
    return ok / len(dt.requests)


def test_moving_a_control_reruns_and_the_numbers_follow():
    ex = tw.DeploymentExplorer(n=60, rate=4.0, ttft_ms=1000, tpot_ms=50)
    first, numbers = ex.trace, dict(ex.numbers)
    assert numbers["gpus"] == 2 and numbers["transfers"] == 60
    assert numbers["attainment"] == pytest.approx(by_hand(first, 1000, 50))
    ex.knobs["rate"].value = 16.0  # as a learner drags it: a new run, other numbers
    assert ex.trace is not first and ex.numbers["ttft_p99"] != numbers["ttft_p99"]
    assert ex.trace.requests[1].arrival_s < first.requests[1].arrival_s  # arrivals 4x as dense
    assert ex.numbers["attainment"] == pytest.approx(by_hand(ex.trace, 1000, 50)) and ex.numbers["attainment"] < 1
    again = ex.trace
    ex.knobs["ttft_ms"].value = 100  # a target only recounts
    assert ex.trace is again and ex.numbers["attainment"] == pytest.approx(by_hand(again, 100, 50))
    ex.knobs["deployment"].value = "colocated"
    assert tuple(ex.view.fig.layout.yaxis.ticktext) == ("replica 0", "replica 1")
    assert ex.view.drawn_transfers == 0 and ex.numbers["gpus"] == 2
    assert ex.knobs["prefill_instances"].disabled and not ex.knobs["replicas"].disabled
    ex.set(deployment="disaggregated", prefill_instances=2, decode_instances=3, link="ib-ndr")
    assert len(heatmaps(ex.view)) == 5 and ex.numbers["gpus"] == 5
    assert "ib-ndr" in ex.view.fig.layout.annotations[0].text


def test_thousands_of_steps_redraw_in_well_under_a_second():
    dt = deploy(knobs={"rate": 6.0}, prefill_instances=1, decode_instances=1)  # 200 requests
    assert sum(len(x.steps) for x in dt.instances) > 2000
    view = tw.DeploymentView(deploy(prefill_instances=1, decode_instances=1))
    t0 = time.perf_counter()
    view.set_trace(dt)
    assert time.perf_counter() - t0 < 0.5
    assert view.drawn_transfers == len(dt.transfers) == 200


def test_zh_tw_labels_are_chinese(zh, split):
    view = tw.DeploymentView(split)
    labels = list(view.fig.layout.yaxis.ticktext)
    assert labels == ["prefill 執行個體 0", "prefill 執行個體 1", "decode 執行個體 0"]
    ex = tw.DeploymentExplorer(n=30)
    words = [w.description for w in ex.knobs.values()] + [ex.numbers_line.value, ex.view.words.value,
                                                          ex.view.fig.layout.annotations[0].text,
                                                          transfer_line(ex.view).name, transfer_line(ex.view).text[0]]
    assert all(CJK.search(w) for w in words), [w for w in words if not CJK.search(w)]
    assert not any("widgets.deploy." in w for w in words)


def test_each_roles_own_knobs_and_the_ttft_convention_reach_the_run():
    ex = tw.DeploymentExplorer(n=40, rate=4.0, ttft_ms=400, tpot_ms=25)
    assert not ex.knobs["prefill_chunk_size"].disabled and ex.knobs["gpus"].disabled
    ex.set(prefill_chunk_size="none", decode_batch_size=8, prefill_gpus=2, decode_gpus=4)
    pre, dec = ex.trace.instances
    assert pre.policy == "whole-prompt" and dec.num_slots == 8  # the prefill GPU runs whole prompts
    assert ex.trace.gpus_per_instance == {"prefill": 2, "decode": 4} and ex.numbers["gpus"] == 6
    run = ex.trace
    ex.knobs["ttft_at"].value = "decode"  # where the first token counts: a recount, the same run
    seen = run.as_seen("decode")
    assert ex.trace is run
    assert ex.numbers["attainment"] == pytest.approx(sum(
        (r.token_times[0] - r.arrival_s) * 1e3 <= 400 and (len(r.token_times) < 2 or (
            r.token_times[-1] - r.token_times[0]) * 1e3 / (len(r.token_times) - 1) <= 25) for r in seen) / len(seen))
    ex.set(deployment="colocated", gpus=2)
    assert ex.trace.gpus_per_instance == {"replica": 2} and ex.numbers["gpus"] == 4
    assert all(ex.knobs[k].disabled for k in ("prefill_chunk_size", "decode_batch_size", "prefill_gpus",
                                              "decode_gpus", "ttft_at"))
    assert ex.set(deployment="disaggregated", prefill_gpus=8, decode_gpus=8) is not None  # 8 KV heads: allowed


def test_a_batch_its_memory_caps_says_the_slots_that_ran(zh):
    """Issue 49 item 2: a decode batch of 128 on h200-70b-fp8 runs the slots the decode GPU's KV memory holds (the
    run reports them: DeploymentTrace.effective); the numbers line says so, in the reader's language, and says
    nothing where the batch runs as asked."""
    import tinyserve

    tinyserve.set_language("en")
    ex = tw.DeploymentExplorer(n=30, decode_batch_size=128)
    ran = ex.trace.effective(1)
    assert ran["knobs"]["batch_size"] == 128 and ran["num_slots"] < 128  # capped (38 slabs on this preset)
    assert ex.slots()[1] == {"role": "decode", "asked": 128, "slots": ran["num_slots"]}
    assert ex.trace.instances[1].num_slots == ran["num_slots"]  # the rows drawn are the slots that ran
    slots = ran["num_slots"]
    assert (f"The decode batch of 128 runs {slots} slots: its KV memory holds {slots} of the 128 asked."
            in ex.numbers_line.value)
    tinyserve.set_language("zh-TW")
    assert f"decode 執行個體的批次 128 實際只跑 {slots} 個位子" in ex.numbers_line.value
    ex.set(decode_batch_size=16)  # fits: the line says nothing of slots
    assert ex.trace.effective(1)["num_slots"] == 16 and "位子" not in ex.numbers_line.value


def test_the_axis_opens_on_a_window_where_each_prefill_step_and_transfer_stands_apart():
    """Issue 52 item 2: 200 requests over ~107 s; the axis opens on WINDOW_S seconds around the cursor, the whole
    run as an overview under it (plotly's rangeslider), and in that window each prefill step is wide enough on
    screen to be drawn apart (a 1-px gap between columns), each transfer's arrow apart from the next."""
    from tinyserve_widgets import deployment as DV

    ex = tw.DeploymentExplorer("chapter-7.3-mixed", "chunked", deployment="disaggregated", ttft_ms=400,
                               tpot_ms=25, rate=2.0, chunk_size=512)  # 7.3 section 6's opening settings
    view, dt = ex.view, ex.trace
    lo, hi = view.fig.layout.xaxis.range
    t0, t1 = min(r.arrival_s for r in dt.requests), max(x.end_s for x in dt.transfers)
    assert t1 - t0 > 5 * DV.WINDOW_S and hi - lo == pytest.approx(DV.WINDOW_S) and lo <= view.time <= hi
    slider = view.fig.layout.xaxis.rangeslider
    assert slider.visible and slider.range[0] <= t0 and slider.range[1] >= max(
        inst.steps[-1].start_s + inst.steps[-1].duration_s for inst in dt.instances)
    px_per_s = (view.fig.layout.width - DV.MARGIN_L - DV.MARGIN_R) / (hi - lo)
    pre = [s for s in dt.instances[0].steps if lo <= s.start_s < hi]
    assert len(pre) >= 10
    assert np.median([s.duration_s for s in pre]) * px_per_s >= DV.STEP_GAP_PX
    assert heatmaps(view)[0].xgap == 1  # the prefill block: one column a step, a gap between them
    landed = sorted(x.end_s for x in dt.transfers if lo <= x.end_s < hi)
    assert len(landed) >= 5 and np.median(np.diff(landed)) * px_per_s >= 10  # arrows apart, in pixels
    # the cursor carries the window: moved inside it, the axis stays; moved out, the window goes around it
    view.cursor.value = (lo + hi) / 2 + 1.0
    assert tuple(view.fig.layout.xaxis.range) == (lo, hi)
    view.cursor.value = 20.0
    lo2, hi2 = view.fig.layout.xaxis.range
    assert lo2 <= 20.0 <= hi2 and hi2 - lo2 == pytest.approx(DV.WINDOW_S)
    # the overview dragged to the whole run (the browser's relayout lands in the layout): no gap hides a sliver
    view.fig.layout.xaxis.range = list(DV.run_range(dt))
    assert view.shown == tuple(DV.run_range(dt)) and heatmaps(view)[0].xgap == 0
    # the static picture under the cell: the window shown now, over the overview of the whole run
    view.fig.layout.xaxis.range = [lo2, hi2]
    fig = view.static()
    main, over = fig.axes
    assert main.get_xlim() == pytest.approx((lo2, hi2)) and over.get_xlim() == pytest.approx(DV.run_range(dt))
