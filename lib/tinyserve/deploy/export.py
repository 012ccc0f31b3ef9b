"""A deployment's Perfetto file: each instance's own export (trace/export.py to_perfetto: a track per slot, a slice
per request phase, its counters) as one process, and the K/V transfers as slices on one more process, a track per
link (each prefill instance sends over its own link, one transfer at a time), all on the deployment's clock."""
from __future__ import annotations

from ..trace import export

US = 1e6  # Chrome-trace times are microseconds


def to_perfetto(dt) -> dict:
    """Chrome-trace JSON of a DeploymentTrace (ui.perfetto.dev): process i+1 is instance i, the last the links."""
    events: list[dict] = []
    for i, (role, tr) in enumerate(zip(dt.roles, dt.instances)):
        pid = i + 1
        for e in export.to_perfetto(tr)["traceEvents"]:
            e = {**e, "pid": pid}
            if e.get("name") == "process_name":
                e["args"] = {"name": f"instance {i} {role} ({tr.policy})"}  # words: ok (a track's name, as slot N)
            events.append(e)
        events.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}})
    if dt.transfers:
        pid = len(dt.instances) + 1
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"links ({dt.link})"}})
        events.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}})
        for src in sorted({x.src for x in dt.transfers}):
            events.append({"ph": "M", "pid": pid, "tid": src + 1, "name": "thread_name",
                           "args": {"name": f"from instance {src}"}})  # words: ok (a track's name)
        for x in dt.transfers:
            events.append({"ph": "X", "pid": pid, "tid": x.src + 1, "name": f"{x.request_id} kv", "cat": "transfer",
                           "ts": x.start_s * US, "dur": (x.end_s - x.start_s) * US,
                           "args": {"request": x.request_id, "src": x.src, "dst": x.dst, "bytes": x.bytes,
                                    "real_bytes": x.real_bytes, "waited_ms": (x.start_s - x.ready_s) * 1e3}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"workload": dt.workload, "deployment": dt.config,
                          "clock": dt.instances[0].clock if dt.instances else None, "hardware": dt.hardware}}
