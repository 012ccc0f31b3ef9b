"""What the exercises' check cells call. Each checker raises AssertionError with a message for the learner.

A policy answer runs on the real engine (float64, so tokens compare exactly) beside the built-in reference
policy, on several workloads seeded freshly at check time, and must match it step for step: the same works in
every step, the same metrics, the same tokens. The chunker and the slab allocator are checked the same way, at
every step of a real run. A numeric answer is compared with what the engine's own trace says for inputs
chosen here. Nothing is compared with a stored number. Every message is in the classroom catalog (one
table, every language: lib/tinyserve/locale/classroom.pot). Messages that start with INTEGRITY report an answer that bypassed the exercise.

This module is the path every check cell, notebook and grader imports (`importlib.reload(checks).padding_tokens(
...)`, `from tinyserve.classroom.checks import reflect`, check.py's CHECKERS); the work is in modules by job:
    integrity.py      booby-traps, the genuine AssertionError, IntegrityError / NotWritten
    plans.py          a plan in the learner's terms: the rules every plan keeps, its difference from the reference's
    harness.py        a learner's policy run beside the reference policy; the check engine and workloads
    checks_7_1.py ... checks_7_4.py   the checkers of each section's exercises
One flat module per section, not a checkers/ package: a section's checkers are a handful of functions that share
nothing with the other sections' but the harness, the modules sort beside this one, and their names say which
exercises they check; a chapter with exercises adds one file here. Importing the checks loads no torch: only a
checker that runs the model imports it (harness._one_thread).
"""
from __future__ import annotations

import importlib

from . import checks_7_1, checks_7_2, checks_7_3, checks_7_4, harness, integrity, plans

# every check cell runs importlib.reload(checks) to undo a learner's earlier reassignment in the checks: the parts
# are reloaded with it (in import order), so that holds for them as it did for the one-file module
if "CHECKERS" in globals():  # a reload: this module ran before
    for _part in (integrity, plans, harness, checks_7_1, checks_7_2, checks_7_3, checks_7_4):
        importlib.reload(_part)

# fresh_seed is not re-exported: a test that fixes the seeds patches harness.fresh_seed, which the checkers call
from .checks_7_1 import REFLECT, dynamic_policy, padding_tokens, reflect, wasted_fraction  # noqa: E402,F401
from .checks_7_2 import continuous_policy, decode_first_policy, first_step, slot_waste  # noqa: E402,F401
from .checks_7_3 import (CHUNKS, DEPLOY_TARGETS, DEPLOY_TRAFFIC, DEPLOY_WORKLOAD, chunked_policy,  # noqa: E402,F401
                         deployment_choice, deployment_measured, deployment_trace, long_prompt_measure, pick_chunk,
                         plan_chunks)
from .checks_7_4 import kv_bytes_used, slab_allocator, slabs_that_fit  # noqa: E402,F401
from .harness import CHECK_RUNS, MAX_LEN, reference_policy, workload  # noqa: E402,F401
from .integrity import _AE, REFERENCES, IntegrityError, NotWritten  # noqa: E402,F401  (runner.classify reads these)

# the checker a check cell's metadata names (tinyserve.checker), for the self-check and the grader
CHECKERS = {f.__name__: f for f in (padding_tokens, wasted_fraction, dynamic_policy, continuous_policy,
                                    decode_first_policy, first_step, slot_waste, plan_chunks, chunked_policy,
                                    pick_chunk, deployment_choice, slabs_that_fit, kv_bytes_used, slab_allocator)}
# a check cell may hold hidden tests (nbgrader's BEGIN/END HIDDEN TESTS): taken out of the handed-out notebook
# (generate.py), run by the grader, which restores every check cell from the solutions. The checker a learner's
# copy runs then checks the answer's form only; the self-check says so (check.py)
HIDDEN = {"deployment_choice": deployment_measured}
