"""Every word the views show, in one table per language, so a Traditional Chinese edition needs no code change.

    from tinyserve_widgets import words
    words.set_language("zh-Hant")          # after adding WORDS["zh-Hant"] = {...same keys...}
    words.t("waste.sentence.wasted", wasted=31, slots=32)

A key missing from a language falls back to English, so a partial translation still draws.
"""
from __future__ import annotations

WORDS: dict[str, dict[str, str]] = {"en": {
    # phases of a slot in a step (GRID_PHASES order: idle, prefill, padding, decode, wasted)
    "phase.idle": "idle",
    "phase.prefill": "prefill",
    "phase.padding": "padding",
    "phase.decode": "useful decode",
    "phase.wasted": "wasted decode",
    # waste meter categories (Trace.slot_steps keys)
    "waste.useful": "useful",
    "waste.padding": "padding",
    "waste.wasted": "wasted",
    "waste.idle": "idle",
    # axes and titles
    "axis.step": "step",
    "axis.slot": "slot",
    "axis.time.modeled": "time (s, modeled: {hardware})",
    "axis.time.wall": "time (s, measured on this machine)",
    "axis.slot_steps": "slot-steps so far",
    "axis.tokens": "tokens in the step",
    "axis.gap_ms": "ms",
    "axis.kv": "KV cache ({unit})",
    "axis.latency_ms": "latency (ms)",
    "axis.fraction": "fraction of requests",
    "axis.request": "request",
    "title.timeline": "Slots × steps — {policy}, {workload}",
    "title.waste": "Where the slot-steps went (up to step {k})",
    "title.composition": "What each step computed",
    "title.step_tokens": "Step {k}: tokens by request",
    "title.gaps": "Waiting between tokens",
    "title.kv": "KV cache: reserved vs used",
    "title.latency": "Latency distributions",
    "title.requests": "Requests: waiting, prefill, decode, done",
    # notes on figures
    "note.binned": "{steps} steps drawn as {cols} columns of {bin} steps (most frequent phase per column)",
    "note.requests_cut": "first {shown} of {total} requests shown",
    "note.no_steps": "this trace has no steps (e.g. a replay against a real server): only latencies can be drawn",
    "note.budget": "token budget {budget}",
    # cursor
    "cursor.label": "step {k} of {n} · t = {t:.3f} s",
    "cursor.empty": "no steps",
    "cursor.play": "Play",
    # waste meter sentences
    "waste.sentence.wasted": "{wasted} of {slots} slots are computing tokens nobody will read.",
    "waste.sentence.idle": "{idle} of {slots} slots sit idle.",
    "waste.sentence.padding": "{padding} of {slots} slots are mostly computing padding.",
    "waste.sentence.full": "All {slots} slots are computing useful tokens.",
    "waste.sentence.useful": "{useful} of {slots} slots are computing useful tokens.",
    "waste.sentence.total": "So far {pct:.0f}% of the {total:,.0f} slot-steps did useful work.",
    # step composition
    "comp.decode": "decode tokens",
    "comp.prefill": "prefill chunk tokens",
    "comp.padding": "padding tokens",
    "comp.wasted": "wasted decode tokens",
    "comp.decodes_of": "{n} decodes",
    "comp.chunk_of": "{id}: chunk {a}–{b}",
    "comp.itl": "longest gap between two tokens of an in-flight request",
    "comp.ttft": "time to first token of a newcomer",
    "comp.sentence": "Step {k}: {decodes} decode tokens and {prefill} prefill tokens in {chunks} chunk(s); "
                     "longest inter-token gap {itl}; step time {dur:.1f} ms.",
    # KV
    "kv.reserved": "reserved",
    "kv.used": "used",
    "kv.sentence": "Step {k}: {used:.1f} of {reserved:.1f} {unit} reserved are used ({pct:.0f}%); "
                   "{slots} slots × a slab of {slab:,} positions, reserved from step 0.",
    # slabs vs pages (7.4)
    "pages.slabs": "slabs: one per slot, all reserved",
    "pages.blocks": "blocks of {block} positions, handed out as sequences grow",
    "pages.positions": "positions",
    "pages.slab_row": "slot {slot}: {n:,} of {slab:,}",
    "pages.table_row": "page table of slot {slot}: blocks {blocks}",
    # latency
    "lat.ttft": "time to first token",
    "lat.e2e": "end-to-end",
    "lat.p50": "p50",
    "lat.p99": "p99",
    "lat.finished": "{done} of {total} requests finished by step {k}",
    "lat.none": "no finished requests to draw",
    # requests
    "req.waiting": "waiting for a slot",
    "req.prefill": "prefill",
    "req.decode": "decode",
    "req.wasted": "slot held after finishing",
    "req.states": "At step {k}: {counts}",
    "state.not arrived": "not arrived",
    "state.waiting": "waiting",
    "state.prefill": "prefilling",
    "state.decode": "decoding",
    "state.done": "done",
    "state.rejected": "rejected",
    "state.aborted": "aborted",
    # hover
    "hover.cell": "step {step} · {id} · {phase}<br>{tokens} tokens (+{padding} padding), positions {a}–{b}"
                  "<br>step time {ms} ms",
    "hover.bin": "steps {a}–{b}: prefill {prefill}, padding {padding}, decode {decode}, wasted {wasted}, idle {idle}",
    "hover.idle": "step {step} · idle",
    "hover.gap": "no step: nothing to run until the next arrival",
    "hover.template": "slot %{y}<br>%{text}<extra></extra>",
    # explorer
    "knob.policy": "policy",
    "knob.batch_size": "batch size",
    "knob.chunk_size": "chunk length",
    "knob.max_batch_tokens": "token budget (auto: chunk + batch)",
    "knob.timeout": "timeout (s)",
    "knob.order": "newcomers",
    "knob.prefill_first": "prefill-first",
    "knob.decode_first": "decode-first",
    "knob.max_waiting_steps": "max waiting steps",
    "knob.workload": "workload",
    "knob.n": "requests",
    "knob.rate": "arrival rate (req/s)",
    "knob.hardware": "hardware (modeled clock)",
    "knob.kv_budget": "KV budget",
    "knob.max_model_len": "slab length (max_model_len)",
    "opt.preset_len": "preset's",
    "knob.x": "x axis",
    "opt.auto": "auto",
    "opt.full_batch": "full batch",
    "opt.unbounded": "∞ (until no decode runs)",
    "opt.no_cap": "no cap",
    "knob.x.steps": "steps",
    "knob.x.time": "time",
    "explorer.ok": "{policy} on {workload}: {steps} steps, {slots} slots, dry run (modeled clock) in {ms:.0f} ms.",
    "explorer.error": "Cannot run these settings: {message}. The previous figures stay.",
    "explorer.empty": "These settings give a run with no steps ({reason}). The previous figures stay.",
    "explorer.rejected": "{n} of {total} requests rejected; the first: {first}",
    "explorer.real": "Run on the real model",
    "explorer.real.running": "Running the real tiny GPT: {done} of {total} requests, step {steps}. "
                             "Interrupt the kernel (■) to stop.",
    "explorer.real.done": "Real run finished: {steps} steps, wall clock measured on this machine ({s:.1f} s).",
    "explorer.real.scaled": "Scaled down for the real run ({knobs}) so it takes seconds; the dry run above "
                            "used the full workload.",
    "explorer.real.tensors": "Its KV is the tiny GPT's own tensors, sized to the run's longest request "
                             "({slab:,} positions), not the slab length above (the modeled server's).",
    "explorer.real.interrupted": "Real run interrupted after {steps} steps; the previous figures stay.",
    "explorer.real.too_big": "This workload is too long for a real run here ({tokens:,} tokens; limit {limit:,}). "
                             "Lower the request count.",
    "explorer.real.too_slow": "A real run of these settings would take about {s:.0f} s on this CPU (the cpu-tiny "
                              "cost model's estimate of the same steps; limit {limit:.0f} s). Lower the request "
                              "count or move the knob back.",
    "compare.left": "A",
    "compare.right": "B",
    "compare.sentence": "{a}: {ua:.0f}% useful slot-steps, p99 TTFT {ta}; {b}: {ub:.0f}% useful, p99 TTFT {tb}.",
    "unit.ms": "{v:.1f} ms",
    "unit.none": "—",
}}

_language = "en"


def set_language(lang: str) -> None:
    """Choose the table the views read (a language missing from WORDS is an error)."""
    global _language
    if lang not in WORDS:
        raise ValueError(f"language: unknown {lang!r} (have {', '.join(WORDS)})")
    _language = lang


def t(key: str, **fmt) -> str:
    """The text for key in the current language (English if untranslated), formatted with fmt."""
    text = WORDS[_language].get(key)
    if text is None:
        text = WORDS["en"][key]
    return text.format(**fmt) if fmt else text
