"""Modeled vs measured: fit the cost model to this CPU, then check it predicts the real engine's steps.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/costmodel.py            # fit + validate, print the table (~5 min)
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/costmodel.py --write    # also commit-ready: writes the fitted
        lib/tinyserve/presets/cpu-tiny.json and the table lib/tinyserve/data/costmodel-validation.json
    .venv/bin/python benchmarks/costmodel.py --preset cpu-tiny           # validate the shipped preset, no fit

Calibration and validation run in the same process, with the same thread count (1 by default: on a shared 2-core
machine two spinning OpenMP threads slow each other down), and interleaved: one validation repeat between each
two calibration rounds, so both see the same moments of the machine (its speed drifts 5-10% over minutes). The
validation's runs are scheduled by the shipped cpu-tiny preset's clock (the new one does not exist until the last
round), then priced by the new one: what is compared is the same steps, measured and modeled. Each step's time is
the fastest of its repeats (other processes only ever add time), and the table says how busy the machine was
(load average) when it was taken.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import torch

from tinyserve.cost.presets import PRESET_DIR, get_preset, save_preset
from tinyserve.model.runner import load_model
from tinyserve.tools import validate
from tinyserve.tools.calibrate import FULL_PLAN, calibrate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--preset", help="validate this preset instead of fitting one now")
    ap.add_argument("--write", action="store_true", help="write the fitted cpu-tiny preset and the table JSON")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    load0 = os.getloadavg()[0]
    t0 = time.time()
    model = load_model(device="cpu", dtype="float32")
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    if a.preset:
        preset = get_preset(a.preset)
        rows = validate.validate(model, preset, repeats=a.repeats, log=log)
    else:
        shipped, measured = get_preset("cpu-tiny"), []
        plan = {**FULL_PLAN, "rounds": a.repeats + 1}  # a validation repeat between each two rounds
        preset = calibrate(model, name="cpu-tiny", plan=plan,
                           between_rounds=lambda i: measured.append(validate.measure(model, shipped, log=log, repeat=i)))
        rows = validate.compare(measured, preset)
        print(f"fit: {json.dumps(preset.details['fit'])} ({time.time() - t0:.0f} s)", file=sys.stderr)
        for q in preset.details["points"]:  # where the fitted model misses its own calibration points
            err = q["modeled_s"] / q["measured_s"] - 1
            if abs(err) > 0.1:
                print(f"  {q['label']}: measured {q['measured_s'] * 1e3:.3f} ms, modeled {q['modeled_s'] * 1e3:.3f} ms "
                      f"({err:+.0%})", file=sys.stderr)
        if a.write:
            save_preset(preset, PRESET_DIR / "cpu-tiny.json")
    load1 = os.getloadavg()[0]
    print(validate.format_table(rows))
    goals = validate.goals_met(rows)
    for layout in ("slab", "paged"):
        g = validate.goals_met([r for r in rows if r["kv_layout"] == layout])
        print(f"\ngoals ({layout}): {g['total_within_10pct']}/{g['runs']} runs with the modeled total within "
              f"{validate.GOAL_TOTAL_PCT:.0f}%, {g['step_median_within_15pct']}/{g['runs']} with the per-step "
              f"median error <= {validate.GOAL_STEP_MEDIAN_PCT:.0f}%")
    print(f"machine: {preset.details.get('device', platform.processor())}, {a.threads} thread(s), torch "
          f"{torch.__version__}; 1-min load average {load0:.1f} at the start, {load1:.1f} at the end "
          f"({time.time() - t0:.0f} s)")
    if a.write:
        table = {"date": datetime.date.today().isoformat(), "device": preset.details.get("device"),
                 "threads": a.threads, "torch": torch.__version__, "repeats": a.repeats,
                 "load_average_start_end": [round(load0, 2), round(load1, 2)],
                 "note": "calibration and validation in one process, interleaved (a validation repeat between "
                         "each two calibration rounds); the load average says how busy the machine was",
                 "workloads": validate.SCALED, "preset": {k: getattr(preset, k) for k in (
                     "overhead_s", "call_overhead_s", "row_overhead_s", "walk_overhead_s", "bandwidth_Bps", "kv_bandwidth_Bps",
                     "peak_flops", "attn_flops", "kv_cache_bytes", "kv_cache_bandwidth_Bps", "kv_cache_ramp",
                     "miss_row_overhead_s", "big_step_tokens", "big_step_token_s", "masked_pair_s", "gather_call_s",
                     "gather_Bps")},
                 "fit": preset.details.get("fit"), "goals": goals, "rows": rows}
        validate.TABLE_FILE.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
