"""Every word a learner or an instructor reads from the classroom tools, in one table (translate it here).

`say(key, **fields)` fills a template with str.format. Keys are grouped by who speaks: the checkers (a check
cell's message), the self-check and the grader (their reports and CSV reasons).
"""
from __future__ import annotations

TEXT: dict[str, str] = {
    # ------------------------------------------------------------------------------- checkers: integrity
    "integrity": "INTEGRITY: {why}",
    "rebound": "AssertionError was rebound, so checks could not fail; restart the kernel and remove that",
    "custom_exc": "an IPython custom exception handler (set_custom_exc) would hide failing checks",
    "called_builtin": "your answer called {what}; the exercise is to write this part yourself",
    "what_builtin": "the built-in {cls}.{name}",
    "what_engine": "the engine (Engine.start / tinyserve.run)",
    "what_run_step": "the engine (Run.step)",
    "not_policy": "expected a class that subclasses tinyserve.policies.Policy, got {got}",
    "subclasses_builtin": "{cls} subclasses the built-in {ref}; subclass Policy and write plan()",
    "copies_builtin": "{cls}.{name} is the built-in {ref}; write it yourself",
    # ------------------------------------------------------------------------------ checkers: not written
    "init_not_written": "your policy's __init__ is not written yet ({err})",
    "part_not_written": "part of your policy is not written yet (NotImplementedError: {err})",
    "fn_not_written": "{fn} is not written yet ({err})",
    # ----------------------------------------------------------------------------- checkers: policy steps
    "where": "[workload seed {seed}: {n} requests, {knobs}] ",
    "init_failed": "{cls}({args}) failed: {err}",
    "not_plan": "step {idx}: plan() must return Plan(works), got {got}",
    "not_works": "step {idx}: Plan.works must be a list of Work, got {got}",
    "not_running": "step {idx}: your plan computes {rid}, which is not in self.running (admit a request by claiming "
                   "a slot for it: req.slot = self.pool.claim(); self.running.append(req))",
    "already_done": "step {idx}: your plan asks {rid} to {phase}, but {rid} already finished; it must leave "
                    "self.running and give its slot back when it finishes",
    "wrong_slot": "step {idx}: {rid} holds slot {held}, but your Work puts it on slot {slot}",
    "two_on_slot": "step {idx}: two works on slot {slot}; a slot computes for one request per step",
    "bad_prefill": "step {idx}: {rid} has {done} of its {total} prompt tokens in its KV; a prefill must continue at "
                   "position {done} with 1..{left} tokens, yours covers {lo}..{hi}",
    "early_decode": "step {idx}: {rid} decodes before its prompt is prefilled ({done} of {total} tokens)",
    "bad_phase": "step {idx}: unknown phase {phase!r} (prefill, decode or wasted)",
    "over_batch": "step {idx}: your plan computes for {n} requests, more than batch_size={b}",
    "over_budget": "step {idx}: your plan computes {n} tokens ({works}), over the token budget max_batch_tokens={b}",
    "fmt_prefill": "{rid} prefill of positions {lo}..{hi}{pad} on slot {slot}",
    "fmt_pad": " + {n} padding",
    "fmt_other": "{rid} {phase} on slot {slot}",
    "extra_work": "you computed {work}; the reference did not compute {rid} in this step",
    "missing_work": "you did not compute {rid}; the reference computed {work}",
    "other_work": "{rid}: you computed {mine}, the reference {ref}",
    "wrong_time": "the same works, but your step started at t = {mine:.1f} ms and the reference's at t = {ref:.1f} ms "
                  "(a batch launched at the wrong time)",
    "diff_head": "step {idx} (t = {t:.1f} ms): ",
    "diff_ref": ". The reference's step {idx} (t = {t:.1f} ms): {works}",
    "diff_state": ". When your policy planned it: running {running}, waiting {waiting}, {free} free slot(s), "
                  "batch_size={b}",
    "none": "none",
    "arrived": "{rid} (arrived {ms:.0f} ms)",
    "unfinished": "your policy did not finish the workload: after {steps} steps {left} are unfinished",
    "policy_raised": "step {idx}: your policy raised {exc}: {err}",
    "slot_leak": "after step {idx}, {held} slots are claimed but only {running} requests are running: a finished "
                 "request's slot was not given back (self.pool.release(req.slot)); finished so far: {gone}",
    "extra_step": "your policy ran a step {idx}; the reference had finished everything after {n} steps",
    "step_count": "your policy finished after {mine} steps, the reference after {ref}",
    "other_tokens": "{rid} generated different tokens than under the reference: the same model must give the same "
                    "tokens when the same positions are computed; check the prefill positions",
    "metric": "metric {key}: yours {mine}, the reference's {ref}",
    "no_free_slot": "step {idx}: your policy claimed a slot when none was free ({held} of {slots} held; running "
                    "{running}, batch_size={b}). Does plan() stop admitting at batch_size, and is the slot of every "
                    "finished request given back?",
    "released_twice": "step {idx}: your policy released a slot twice ({err}); release a request's slot once, when it "
                      "finishes",
    "stalled": "step {idx}: your policy returned an empty plan with requests waiting {waiting} and none left to "
               "arrive: they would wait forever (launch what is waiting when nothing more comes)",
    "bad_wake": "step {idx}: Plan.wake_s must be later than now ({err})",
    "engine_stopped": "step {idx}: the engine stopped: {err}",
    "policy_passed": "passed: {cls} matched the built-in {kind} policy step for step on {n} fresh workloads",
    "hint_dynamic": "Launch when the batch is full, when the oldest waiting request has waited `timeout`, or when "
                    "nothing more will arrive; otherwise wait (Plan([], wake_s=deadline)).",
    "hint_continuous": "Every step: running requests that are prefilled decode; waiting requests enter free slots "
                       "(FIFO, up to batch_size) and prefill their whole prompt in the same step.",
    "hint_decode_first": "Newcomers wait while anything decodes; count the decode steps in which one could have "
                         "entered (a request waiting, a slot free, fewer than batch_size running); when that count "
                         "reaches max_waiting_steps, or nothing is decoding, admit (FIFO) and start counting again.",
    "hint_chunked": "Admit into free slots first; then every prefilled request decodes; then the budget left goes "
                    "to prefill chunks (at most chunk_size each) in admission order.",
    # --------------------------------------------------------------------------- checkers: numeric answers
    "not_whole": "{fn} must return a whole number, got {got}",
    "not_whole_tokens": "{fn} must return a whole number of tokens, got {got}",
    "padding_wrong": "for prompts of {lens} tokens in one static batch, the engine's prefill computed {truth} padding "
                     "tokens; your padding_tokens returned {got}",
    "padding_passed": "passed: padding_tokens agreed with the engine's trace on {n} batches",
    "wasted_wrong": "for outputs {outs} in static batches of {b} (in arrival order), the engine's decode steps computed "
                    "{useful} useful and {wasted} wasted tokens (the first token of each request comes from its "
                    "prefill): a wasted fraction of {truth:.6f}; your wasted_fraction returned {got}",
    "outs_long": "[{first}, then {n} x {second}]",
    "wasted_passed": "passed: wasted_fraction agreed with the engine's trace on {n} workloads",
    "first_step_wrong": "in a {label} trace, {rid} (arrived at t = {ms:.1f} ms) was first computed in step {truth} "
                        "({work}); your first_step returned {got}",
    "first_step_passed": "passed: first_step agreed with {n} traces",
    "slot_waste_wrong": "in a {label} trace, slot {slot} computed {pad} padding tokens and {wasted} wasted decode "
                        "tokens = {total} thrown away; your slot_waste returned {got}",
    "slot_waste_passed": "passed: slot_waste agreed with {n} traces",
    "pick_chunk_row": "{c}: gap {g:.1f} ms / TTFT {t:.1f} ms",
    "pick_chunk_wrong": "targets: worst gap <= {itl:.1f} ms and newcomer TTFT <= {ttft:.1f} ms. The engine measured "
                        "{rows}. The largest chunk meeting both is {truth}; your pick_chunk returned {got}",
    "pick_chunk_passed": "passed: pick_chunk chose right for {n} pairs of targets (workload seed {seed})",
    "slabs_wrong": "with {memory:,} bytes of KV memory, slabs of max_len={max_len} positions and {bpt:,} bytes of K "
                   "and V per position, the engine made {truth} slots; your slabs_that_fit returned {got}",
    "slabs_passed": "passed: slabs_that_fit agreed with the engine's slot pool on {n} memories",
    "kv_wrong": "after step {idx}, {rid} (a {prompt}-token prompt, {gen} token(s) generated) has K/V for {ctx} "
                "positions in the engine = {truth:,} bytes ({bpt:,} bytes per position); your "
                "kv_bytes_used({prompt}, {gen}, {bpt}) returned {got:,}",
    "kv_sum_wrong": "after step {idx} the trace reports {truth:,} KV bytes in use; the sum of your kv_bytes_used is "
                    "{got:,}",
    "kv_passed": "passed: kv_bytes_used agreed with the trace's KV bytes in use on every step (workload seed {seed})",
    # the token-budget chunker
    "chunker_not_list": "{where}step {idx}: plan_chunks must return a list of whole numbers, one per prefilling "
                        "request, got {got}",
    "chunker_len": "{where}step {idx}: {n} requests were still prefilling ({state}), your plan_chunks returned {m} "
                   "numbers",
    "chunker_wrong": "{where}step {idx}: with {decodes} decode(s) in the step, chunk_size={c}, max_batch_tokens={b} and "
                     "prompts still prefilling {state}, the engine's chunked policy gave them {truth} tokens; your "
                     "plan_chunks gave {got}",
    "chunker_state": "{rid} {done}/{total}",
    "chunker_passed": "passed: plan_chunks matched the engine's chunked policy on every step of {n} fresh workloads",
    # the slab allocator
    "slabs_count": "{where}with kv_budget={memory:,} bytes, slabs of {max_len} positions x {bpt:,} bytes and "
                   "batch_size={b}, the engine made {truth} slots; your MySlabs made num_slots={got}",
    "slabs_claim": "{where}step {idx}: the engine's pool gave slot {truth} to {rid} ({free} free before); your "
                   "claim() returned {got}",
    "slabs_free": "{where}step {idx}: the engine's pool has {truth} free slot(s); your num_free says {got}",
    "slabs_held": "{where}after step {idx}: the engine's pool holds {truth:,} bytes in claimed slabs ({held} "
                  "slab(s) held); your held_bytes() says {got}",
    "slabs_overcommit": "{where}step {idx}: every one of the {n} slabs is held, yet your claim() handed out slot "
                        "{got}: it must refuse (return None) instead of promising memory that is not there",
    "slabs_release_twice": "{where}releasing slot {slot}, which is not held, must raise ValueError; your release() "
                           "accepted it",
    "slabs_raised": "{where}step {idx}: your MySlabs.{method} raised {exc}: {err}",
    "slabs_passed": "passed: MySlabs matched the engine's slot pool on every claim and release of {n} fresh runs",
    # predict -> derive -> check
    "reflect_head": "{title}",
    "reflect_guess": "  your prediction: {guess}",
    "reflect_no_guess": "  your prediction: (none written down)",
    "reflect_fn": "  your function:   {got}",
    "reflect_fn_missing": "  your function:   not written yet",
    "reflect_engine": "  the engine:      {truth}",
    "reflect_note": "  {note}",
    "reflect_padding": "A static batch of a 50- and a 4,000-token prompt (padding tokens of its prefill):",
    "reflect_wasted": "The chapter's batch: one 2,000-token output and 31 of 20 tokens, batch size 32 "
                      "(wasted share of the decode tokens):",
    "reflect_wasted_note": "over all 32 slots; over the 31 short requests' slots alone the engine wasted {short:.1%} "
                           "of their decode steps (the 7.1 notebook's figure: a different denominator)",
    "reflect_kv": "A 1,000-token prompt that has generated 200 tokens (K/V positions held):",
    "reflect_slabs": "An H200's KV memory left after a 70B model's FP8 weights, slabs of 8,192 positions (slots):",
    # ------------------------------------------------------------------------------------ self-check report
    "sc_correct": "correct",
    "sc_wrong": "wrong",
    "sc_blank": "not attempted",
    "sc_manual": "open question: graded by your teacher (see the rubric they give you)",
    "sc_line": "{mark} {label}: {status}{msg}",
    "sc_total": "{correct} of {total} answers correct ({points:g} of {max_points:g} points); {blank} not attempted",
    "sc_bad_file": "{path}: {why}",
    "sc_running": "checking {path} (runs your notebook's code cells in order, then each check) ...",
    # ----------------------------------------------------------------------------- grader: results, reasons
    "not_utf8": "not a notebook: the file is not UTF-8 text",
    "bad_json": "not a notebook: invalid JSON ({msg} at line {line}, column {col}; a truncated file?)",
    "no_cells": "not a notebook: valid JSON, but not a Jupyter notebook (no list of cells)",
    "bad_schema": "not a valid notebook: {err}",
    "unreadable": "cannot read the file ({err})",
    "other_assignment": "not one of this assignment's notebooks (none of its check cells are there)",
    "other_language": "written for a {lang} kernel ({kernel}); these exercises are Python",
    "no_files": "no files submitted",
    "not_run": "the check did not run",
    "cpu_limit": "stopped: the notebook used its {limit:g} CPU seconds (an endless loop?)",
    "cell_cpu_limit": "the cell used its {limit:g} CPU seconds and was stopped (an endless loop?)",
    "wall_limit": "stopped: the notebook ran {limit:g} s of wall-clock time without finishing (sleeping or blocked?)",
    "memory_limit": "the notebook ran out of its {gib:g} GiB of memory",
    "killed": "the notebook's process was killed ({how}) before this check ran",
    "disarms": "the submission disarms the checks: {why}",
    "delegates": "the answer hands the work to the library ({what} in cell {cell}); write it yourself",
    "its_check": " [its check: {msg}]",
    "changed_package": "the submission changed the tinyserve package's files; its checks cannot be trusted (the other "
                       "submissions were graded against a clean copy)",
    "student_line": "{student}: {points:g}/{max_points:g} points, {passed}/{total} answers passed",
    "student_more": " ({parts})",
    "n_not_submitted": "{n} not submitted",
    "n_failed": "{n} failed",
    "n_blank": "{n} not attempted",
    "n_integrity": "{n} not counted (integrity)",
    "n_invalid": "{n} file(s) not gradable",
    "n_manual": "{n} open answer(s) for you to grade",
    "graded_in": "  {student}/{file}: graded in {s:.1f} s",
    "scan_cell": "code cell {k} {why}",
    "flag_integrity": "integrity: {label}",
    "flag_invalid": "invalid file {file}: {why}",
    "flag_limit": "limit: {file}: {why}",
    "manual_row": "open answer: grade it by its rubric (chapters/solutions)",
}


def say(key: str, **fields) -> str:
    """The text for key, filled in."""
    return TEXT[key].format(**fields)
