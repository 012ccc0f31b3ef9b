"""Exercises: generated from the solutions, right answers pass, blanks and plausible wrong answers fail clearly.

Wrong answers are fed to the checker functions directly (fast, in this process); the notebooks are run the
way nbval runs them (their code cells in order, in one namespace). The seeds the checks draw are fixed here
(itertools.count) so each test is deterministic; in a notebook they are fresh at every check.
"""
from __future__ import annotations

import builtins
import itertools
import re
from pathlib import Path

import pytest

from tinyserve.classroom import checks, harness
from tinyserve.classroom.check import EXERCISES
from tinyserve.classroom.generate import GenerateError, exercise_text, make_exercise, strip_hidden, stub_source
from tinyserve.core.scheduling import ContinuousBatching, Plan, Policy, decode_work
from tinyserve.core.request import Work

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "chapters" / "solutions").glob("*.ipynb"))
nbformat = pytest.importorskip("nbformat")


@pytest.fixture(autouse=True)
def fixed_seeds(monkeypatch, torch_one_thread):
    """Seeds 1, 2, 3, ... instead of fresh ones, so a test sees the same workloads every time."""
    counter = itertools.count(1)
    monkeypatch.setattr(harness, "fresh_seed", lambda: next(counter))


def fails(check, answer, *fragments: str) -> str:
    """Run a check on an answer that must fail; its message must contain every fragment."""
    with pytest.raises(AssertionError) as e:
        check(answer)
    msg = str(e.value)
    for f in fragments:
        assert f in msg, f"expected {f!r} in the learner's message:\n{msg}"
    return msg


# --------------------------------------------------------------------------------------------- generator
def test_exercises_are_up_to_date_with_the_solutions():
    assert len(SOLUTIONS) >= 4
    for sol in SOLUTIONS:
        ex = ROOT / "chapters" / "exercises" / sol.name
        assert ex.is_file(), f"{ex} missing: run python -m tinyserve.classroom.generate"
        assert ex.read_text(encoding="utf-8") == exercise_text(sol), \
            f"{ex} is out of date with {sol}: run python -m tinyserve.classroom.generate"


def graded_cells():
    for sol in SOLUTIONS:
        nb = nbformat.read(sol, as_version=4)
        yield sol.name[:3], nb, [c for c in nb.cells if {"check", "open"} & set(c.metadata.get("tags", []))]


def test_letters_run_in_order_in_each_notebook_and_name_one_exercise_each():
    """Each notebook's letters run in order and no letter is used twice; an exercise added later takes the next
    free letter (7.3's (o), after 7.4's (l)-(n)), so the labels and cell ids a gradebook already holds stay."""
    seen = []
    for _, _, cells in graded_cells():
        mine = []
        for c in cells:
            letter = re.search(r"\(([a-z])\)", c.metadata["tinyserve"]["exercise"]).group(1)
            if not mine or mine[-1] != letter:
                mine.append(letter)
        assert mine == sorted(mine), mine
        seen += mine
    assert sorted(seen) == [chr(ord("a") + i) for i in range(len(seen))], seen
    assert len(seen) >= 15  # three new schedulers, two open questions and a deployment beside the first nine


def test_every_graded_cell_carries_nbgrader_metadata_and_matches_the_self_check_table():
    for num, nb, cells in graded_cells():
        ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
        assert len(ids) == len(set(ids)), num
        auto = []
        for c in cells:
            g, t = c.metadata["nbgrader"], c.metadata["tinyserve"]
            assert g["grade"] is True and g["points"] == t["points"] > 0 and g["schema_version"] == 3
            if "check" in c.metadata["tags"]:
                assert g["locked"] is True and g["solution"] is False
                assert f"checks).{t['checker']}({t['answer']})" in c.source
                auto.append((t["exercise"], t["checker"], t["answer"], t["points"]))
            else:
                assert c.cell_type == "markdown" and g["solution"] is True and "Rubric" in c.source
        assert auto == EXERCISES[num]
        for c in nb.cells:
            if "solution" in c.metadata.get("tags", []):
                assert c.metadata["nbgrader"]["solution"] is True
            elif "nbgrader" in c.metadata and not c.metadata["nbgrader"]["grade"]:
                assert c.metadata["nbgrader"]["locked"] is True  # given text and code is read-only
            assert "BEGIN SOLUTION" not in c.source or "solution" in c.metadata.get("tags", [])


# the cells a learner writes in without being graded: a prediction or a sweep (editable, no nbgrader metadata)
LEARNER_CELLS = {"7.1": ["a-predict", "b-predict"], "7.2": ["g-sweep"], "7.3": ["k-sweep", "o-sweep"], "7.4": []}
RELEASED = [ROOT / "chapters" / d / "exercises" for d in (".", "zh-TW")]


@pytest.mark.parametrize("folder", RELEASED, ids=["en", "zh-TW"])
def test_every_given_cell_of_the_released_exercises_is_locked(folder):
    """As the README says: given text and code are read-only (nbgrader `locked: true`, which nbgrader's LockCells
    makes non-editable in JupyterLab and autograde restores); only answers and the learner's own cells are not."""
    names = sorted(p.name for p in folder.glob("*.ipynb"))
    assert names == [s.name for s in SOLUTIONS]
    for name in names:
        nb = nbformat.read(folder / name, as_version=4)
        learner = []
        for c in nb.cells:
            md, where = c.metadata, f"{folder.name}/{name} {c.get('id')}"
            if md.get("nbgrader", {}).get("solution"):
                assert "solution" in md.get("tags", []), where
            elif "learner" in md.get("tags", []):
                assert c.cell_type == "code" and "nbgrader" not in md, where
                learner.append(c.get("id"))
            else:
                assert md.get("nbgrader", {}).get("locked") is True, f"{where}: a given cell that is not locked"
                assert md["nbgrader"]["grade_id"] == c.get("id"), where
        assert learner == LEARNER_CELLS[name[:3]], name


def test_the_generator_refuses_a_given_cell_that_is_not_locked():
    nb = nbformat.read(SOLUTIONS[0], as_version=4)
    demo = next(c for c in nb.cells if c.get("id") == "a-demo")
    del demo.metadata["nbgrader"]
    with pytest.raises(GenerateError, match="a-demo: a given cell without nbgrader `locked: true`"):
        make_exercise(nb)
    demo.metadata["tags"] = ["learner"]  # a learner's cell may stay open, but only without nbgrader metadata
    make_exercise(nb)
    demo.metadata["nbgrader"] = {"grade": False, "grade_id": "a-demo", "locked": True, "schema_version": 3,
                                 "solution": False, "task": False}
    with pytest.raises(GenerateError, match="learner's cell must be a code cell without nbgrader metadata"):
        make_exercise(nb)


def test_hints_sit_above_the_marker_and_give_no_formula():
    for _, nb, _ in graded_cells():
        for c in nb.cells:
            if "solution" in c.metadata.get("tags", []) and c.cell_type == "code":
                for region in c.source.split("### BEGIN SOLUTION")[1:]:
                    body = region.split("### END SOLUTION")[0]
                    assert "Hint" not in body  # nbgrader drops the whole region, hints included


def test_stub_is_nbgraders_with_our_code_stub():
    src = "def f(x):\n    y = 1\n    # Hint: think.\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION"
    out = stub_source(src)
    assert out == ("def f(x):\n    y = 1\n    # Hint: think.\n    # YOUR CODE HERE\n"
                   '    raise NotImplementedError("write your answer here")')
    compile(out, "stub", "exec")


@pytest.mark.parametrize("src", ["### BEGIN SOLUTION\nx = 1", "x = 1\n### END SOLUTION",
                                 "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"])
def test_unpaired_markers_are_errors(src):
    with pytest.raises(GenerateError):
        stub_source(src)


def test_a_marker_outside_a_solution_cell_is_an_error():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("see ### BEGIN SOLUTION below")])
    with pytest.raises(GenerateError, match="not a solution cell"):
        make_exercise(nb)


def test_exercises_hold_no_answer_text():
    for sol in SOLUTIONS:
        nb = nbformat.read(sol, as_version=4)
        ex = make_exercise(nb)
        for s, e in zip(nb.cells, ex.cells):
            assert s.get("id") == e.get("id")
            if "solution" in s.metadata.get("tags", []):
                if s.cell_type == "markdown":
                    assert e.source == "YOUR ANSWER HERE"
                    continue
                assert "NotImplementedError" in e.source and "BEGIN SOLUTION" not in e.source
                for body in s.source.split("### BEGIN SOLUTION")[1:]:
                    body = body.split("### END SOLUTION")[0]
                    answer = [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
                    given = stub_source(s.source)  # a line of given code the answer repeats is fine
                    assert not any(a in e.source for a in answer if len(a) > 12 and a not in given), e.get("id")
            elif "check" in s.metadata.get("tags", []):  # a check's hidden tests are the grader's only
                assert e.source == strip_hidden(s.source)[0] and "HIDDEN" not in e.source
            else:
                assert s.source == e.source


# ------------------------------------------------------------------------- notebooks run as a kernel runs them
def run_cells(path: Path) -> dict[str, BaseException | None]:
    """Execute a notebook's code cells in order in one namespace; check cell id -> what it raised (or None)."""
    nb = nbformat.read(path, as_version=4)
    ns: dict = {"__name__": "__main__"}
    out = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or "self-check" in cell.metadata.get("tags", []):
            continue
        try:
            exec(compile(cell.source, f"{path.name}:{cell.get('id')}", "exec"), ns)
            err = None
        except Exception as e:  # noqa: BLE001 - recorded, judged below
            err = e
        if "check" in cell.metadata.get("tags", []):
            out[cell.get("id")] = err
        else:
            assert err is None, f"{path.name} cell {cell.get('id')} raised {err!r}"
    return out


@pytest.mark.parametrize("sol", SOLUTIONS, ids=lambda p: p.name)
def test_solution_answers_pass_their_checks(sol):
    results = run_cells(sol)
    assert results and all(e is None for e in results.values()), results


@pytest.mark.parametrize("sol", SOLUTIONS, ids=lambda p: p.name)
def test_every_graded_cell_of_an_exercise_fails_as_not_attempted(sol):
    results = run_cells(ROOT / "chapters" / "exercises" / sol.name)
    assert results
    for cid, err in results.items():
        assert type(err).__name__ == "NotWritten" and "not written yet" in str(err), (cid, err)  # reloaded class


# -------------------------------------------------------------------------------- plausible wrong answers
def test_padding_off_by_one():
    fails(checks.padding_tokens, lambda lens: sum(max(lens) - n + 1 for n in lens),
          "padding tokens", "your padding_tokens returned")


def test_padding_to_the_shortest():
    fails(checks.padding_tokens, lambda lens: sum(n - min(lens) for n in lens), "padding tokens")


def test_wasted_fraction_forgetting_the_prefill_token():
    def wrong(outs, b):  # counts max(n) decode steps per batch instead of max(n) - 1
        useful = wasted = 0
        for i in range(0, len(outs), b):
            batch = outs[i:i + b]
            useful += sum(batch)
            wasted += sum(max(batch) - n for n in batch)
        return wasted / (useful + wasted)
    fails(checks.wasted_fraction, wrong, "comes from its prefill", "your wasted_fraction returned")


def test_wasted_fraction_ignoring_batches():
    fails(checks.wasted_fraction, lambda outs, b: sum(max(outs) - n for n in outs) / (len(outs) * (max(outs) - 1) or 1),
          "static batches of")


class Dyn(Policy):
    """The right dynamic policy with one knob for each plausible mistake."""

    wait_for_full = pad_extra = take_all = never_wake = False

    def __init__(self, batch_size, timeout):
        super().__init__(batch_size)
        self.timeout = timeout

    def plan(self, now, more_coming):
        if self.running:  # as the notebook gives it
            works = [decode_work(r) if not r.done else Work(r.slot, r, "wasted", decode_work(r).start, 1)
                     for r in self.running]
            padded, steps = max(r.prompt_len for r in self.running), max(r.output_len for r in self.running)
            for w in works:
                w.pad_keys = padded + steps - (w.start + 1)
            return Plan(works)
        if not self.waiting:
            return Plan([])
        deadline = self.waiting[0].arrival_s + self.timeout
        late = now >= deadline and not self.wait_for_full
        if len(self.waiting) < self.batch_size and not late and more_coming:
            return Plan([], wake_s=None if self.never_wake or self.wait_for_full else deadline)
        n = len(self.waiting) if self.take_all else min(self.batch_size, len(self.waiting))
        batch = [self.waiting.popleft() for _ in range(n)]
        longest = max(r.prompt_len for r in batch)
        for r in batch:
            r.slot = self.pool.claim()
            self.running.append(r)
        return Plan([Work(r.slot, r, "prefill", 0, r.prompt_len, padding=longest - r.prompt_len + self.pad_extra)
                     for r in batch])

    def finished(self, req):
        if all(r.done for r in self.running):
            for r in self.running:
                self.pool.release(r.slot)
            self.running.clear()


def variant(base, **knobs):
    return type(f"{base.__name__}Wrong", (base,), knobs)


def test_dynamic_right_answer_passes():
    checks.dynamic_policy(Dyn)


def test_dynamic_never_launching_a_partial_batch():
    fails(checks.dynamic_policy, variant(Dyn, wait_for_full=True), "the reference", "step")


def test_dynamic_without_a_wake_up_time():
    fails(checks.dynamic_policy, variant(Dyn, never_wake=True), "the reference")


def test_dynamic_padding_off_by_one():
    fails(checks.dynamic_policy, variant(Dyn, pad_extra=1), "padding")


def test_dynamic_admitting_past_the_batch_size():
    fails(checks.dynamic_policy, variant(Dyn, take_all=True), "batch_size")


class Cont(Policy):
    """The right continuous policy with one knob for each plausible mistake."""

    keep_slot = keep_running = decode_first = off_by_one = False

    def plan(self, now, more_coming):
        decodes = [decode_work(r) for r in self.running if r.num_prefilled == r.prompt_len]
        if not (self.decode_first and decodes):
            limit = self.batch_size + 1 if self.off_by_one else self.batch_size
            while self.waiting and (self.off_by_one or self.pool.num_free) and len(self.running) < limit:
                r = self.waiting.popleft()
                r.slot = self.pool.claim()
                self.running.append(r)
        return Plan(decodes + [Work(r.slot, r, "prefill", 0, r.prompt_len) for r in self.running
                               if r.num_prefilled == 0])

    def finished(self, req):
        if self.keep_running:
            return
        self.running.remove(req)
        if not self.keep_slot:
            self.pool.release(req.slot)


def test_continuous_right_answer_passes():
    checks.continuous_policy(Cont)


def test_continuous_forgetting_to_free_a_slot():
    fails(checks.continuous_policy, variant(Cont, keep_slot=True), "was not given back")


def test_continuous_keeping_finished_requests_running():
    fails(checks.continuous_policy, variant(Cont, keep_running=True), "already finished")


def test_continuous_admitting_past_the_batch_size():
    fails(checks.continuous_policy, variant(Cont, off_by_one=True), "none was free", "batch_size")


def test_continuous_admitting_only_when_decodes_drain():
    fails(checks.continuous_policy, variant(Cont, decode_first=True), "the reference computed", "waiting")


class Chunk(Policy):
    """The right chunked-prefill policy with one knob for each plausible mistake."""

    prefill_first = no_budget = from_zero = False

    def __init__(self, batch_size, chunk_size, max_batch_tokens):
        super().__init__(batch_size)
        self.chunk_size, self.max_batch_tokens = chunk_size, max_batch_tokens

    def plan(self, now, more_coming):
        while self.waiting and self.pool.num_free and len(self.running) < self.batch_size:
            r = self.waiting.popleft()
            r.slot = self.pool.claim()
            self.running.append(r)
        decodes = [decode_work(r) for r in self.running if r.num_prefilled == r.prompt_len]
        budget = self.max_batch_tokens - (0 if self.prefill_first else len(decodes))
        chunks = []
        for r in self.running:
            if r.num_prefilled < r.prompt_len and (budget > 0 or self.no_budget):
                start = 0 if self.from_zero else r.num_prefilled
                n = min(self.chunk_size, r.prompt_len - r.num_prefilled)
                n = n if self.no_budget else min(n, budget)
                chunks.append(Work(r.slot, r, "prefill", start, n))
                budget -= n
        if self.prefill_first:
            return Plan(chunks + decodes[:max(0, budget)])
        return Plan(decodes + chunks)


def test_chunked_right_answer_passes():
    checks.chunked_policy(Chunk)


def test_chunked_prefill_before_decodes():
    fails(checks.chunked_policy, variant(Chunk, prefill_first=True), "decode")


def test_chunked_over_the_token_budget():
    fails(checks.chunked_policy, variant(Chunk, no_budget=True), "over the token budget")


def test_chunked_restarting_the_prompt():
    fails(checks.chunked_policy, variant(Chunk, from_zero=True), "must continue at position")


def test_first_step_counting_from_the_first_token():
    def wrong(trace, rid):  # the step that produced the first token, not the first computed
        r = trace.request(rid)
        return next(s.index for s in trace.steps if abs(s.start_s + s.duration_s - r.first_token_s) < 1e-12)
    fails(checks.first_step, wrong, "was first computed in step")


def test_slot_waste_ignoring_padding():
    fails(checks.slot_waste, lambda tr, slot: sum(w.tokens for s in tr.steps for w in s.works
                                                  if w.slot == slot and w.phase == "wasted"), "padding tokens")


def test_pick_chunk_ignoring_the_ttft_target():
    def wrong(measure, cands, itl, ttft):
        ok = [c for c in cands if measure(c)[0] <= itl]
        return max(ok) if ok else None
    fails(checks.pick_chunk, wrong, "The largest chunk meeting both is")


# ------------------------------------------------------------------------------------ 7.3 (o) a deployment
def measured(spec: str) -> float:
    """The share of requests meeting both targets when spec serves the exercise's traffic."""
    return checks.deployment_trace(spec).slo(*checks.DEPLOY_TARGETS)["attainment"]


def test_the_exercise_serves_the_traffic_the_checker_reruns():
    """The given cell's traffic, targets and serve() are the checker's (one case, said twice: held together here)."""
    nb = nbformat.read(ROOT / "chapters" / "solutions" / "7.3-exercises.ipynb", as_version=4)
    ns: dict = {}
    exec("from tinyserve.lang import say", ns)
    exec(next(c.source for c in nb.cells if c.get("id") == "o-setup"), ns)
    assert ns["TRAFFIC"] == checks.DEPLOY_TRAFFIC and (ns["TTFT_MS"], ns["TPOT_MS"]) == checks.DEPLOY_TARGETS
    assert "h200-70b-fp8" in nb.cells[[c.get("id") for c in nb.cells].index("o-setup")].source
    slo = ns["serve"]("disaggregated:1:1").slo(ns["TTFT_MS"], ns["TPOT_MS"])
    assert slo["attainment"] == measured("disaggregated:1:1")
    assert slo["requests"] == checks.DEPLOY_TRAFFIC["n"]


def test_a_choice_is_graded_on_its_own_run():
    """The exercise has an answer on each side of the goal: the split meets it, the replicas' defaults do not (the
    case is chosen so; a change of the engine that moves it fails here first)."""
    from tinyserve.analysis.goodput import GOAL

    split, replicas = measured("disaggregated:1:1"), measured("colocated:2")
    assert split >= GOAL > replicas
    checks.deployment_choice(lambda: ("disaggregated:1:1", split))
    checks.deployment_measured(lambda: ("disaggregated:1:1", round(split, 2)))  # two decimals are the same share
    checks.deployment_measured(lambda: ("disaggregated:1:1:nvlink-h200,prefill_chunk_size=512", split))


@pytest.mark.parametrize("answer, fragment", [
    (lambda: "disaggregated:1:1", "must return a pair"),
    (lambda: ["disaggregated:1:1", 0.94], "must return a pair"),
    (lambda: ("disaggregated:1:1", 94), "a number from 0 to 1"),
    (lambda: ("disaggregated:1:1", True), "a number from 0 to 1"),
    (lambda: ("disaggregated:1:1", "0.94"), "a number from 0 to 1"),
    (lambda: ("replicas", 0.94), "is not a deployment serve takes"),
    (lambda: ("colocated:3", 0.94), "is not two GPUs, one per instance"),
    (lambda: ("colocated:2,gpus=2", 0.94), "is not two GPUs, one per instance"),
    (lambda: ("disaggregated:1:1,decode_gpus=2", 0.94), "is not two GPUs, one per instance"),
    (lambda: ("colocated:2", 0.82), "below the goal"),
])
def test_a_choice_of_the_wrong_form_fails_before_anything_runs(answer, fragment):
    fails(checks.deployment_choice, answer, fragment)
    fails(checks.deployment_measured, answer, fragment)


def test_a_share_nobody_measured_passes_the_form_and_fails_the_grader():
    lie = lambda: ("colocated:2", 0.94)  # noqa: E731  (the replicas' defaults, with the split's share)
    checks.deployment_choice(lie)
    fails(checks.deployment_measured, lie, "its run on this traffic measures", f"{measured('colocated:2'):.3f}")


def test_a_deployment_not_written_is_not_attempted():
    def stub():
        raise NotImplementedError("write your answer here")
    with pytest.raises(checks.NotWritten):
        checks.deployment_choice(stub)


def test_hidden_tests_leave_the_handed_out_check_and_come_back_at_grading():
    from tinyserve.classroom import grade

    src = "x = 1\n### BEGIN HIDDEN TESTS\nsecret(x)\n### END HIDDEN TESTS\ny = 2"
    assert strip_hidden(src) == ("x = 1\ny = 2", True)
    assert strip_hidden("x = 1") == ("x = 1", False)
    for bad in ("### BEGIN HIDDEN TESTS\nx", "x\n### END HIDDEN TESTS",
                "### BEGIN HIDDEN TESTS\n### BEGIN HIDDEN TESTS\n### END HIDDEN TESTS"):
        with pytest.raises(GenerateError):
            strip_hidden(bad)
    sol = nbformat.read(ROOT / "chapters" / "solutions" / "7.3-exercises.ipynb", as_version=4)
    by_id = lambda nb: {c.get("id"): c.source for c in nb.cells}  # noqa: E731
    assert "deployment_measured" in by_id(sol)["o-check"]
    handed = nbformat.read(ROOT / "chapters" / "exercises" / "7.3-exercises.ipynb", as_version=4)
    assert "deployment_measured" not in by_id(handed)["o-check"]
    restored = grade.restore_checks(handed, grade.load_references(ROOT / "chapters")["7.3-exercises.ipynb"])
    assert by_id(restored)["o-check"] == by_id(sol)["o-check"]
    demo = next(c for c in sol.cells if c.get("id") == "o-setup")  # hidden tests only in a graded cell
    demo.source += "\n### BEGIN HIDDEN TESTS\nx = 1\n### END HIDDEN TESTS"
    with pytest.raises(GenerateError, match="hidden tests outside a graded cell"):
        make_exercise(sol)


def test_slabs_rounding_up():
    fails(checks.slabs_that_fit, lambda m, n, b: -(-m // (n * b)), "the engine made")


def test_kv_count_ignoring_the_prompt():
    fails(checks.kv_bytes_used, lambda p, g, b: g * b, "-token prompt", "your kv_bytes_used")


def test_kv_count_including_the_newest_token():
    fails(checks.kv_bytes_used, lambda p, g, b: (p + g) * b, "has K/V for")


# ------------------------------------------------------------------------------------------------ integrity
def test_subclassing_the_built_in_policy_is_reported():
    fails(checks.continuous_policy, type("Mine", (ContinuousBatching,), {}), "INTEGRITY", "subclasses")


def test_calling_the_built_in_policy_is_reported():
    class Mine(Policy):
        def plan(self, now, more_coming):
            return ContinuousBatching.plan(self, now, more_coming)
    fails(checks.continuous_policy, Mine, "INTEGRITY", "ContinuousBatching.plan")


def test_copying_the_built_in_method_is_reported():
    fails(checks.continuous_policy, type("Mine", (Policy,), {"plan": ContinuousBatching.plan}), "INTEGRITY")


def test_asking_the_engine_for_a_numeric_answer_is_reported():
    import tinyserve

    def wrong(lens):
        from tinyserve.core.request import Request
        from tinyserve.core.workloads import make_prompt
        reqs = [Request(f"r{i}", make_prompt(n), 1, ignore_eos=True) for i, n in enumerate(lens)]
        return tinyserve.run(reqs, "static", batch_size=len(lens), progress=False).metrics()["padding_tokens"]
    fails(checks.padding_tokens, wrong, "INTEGRITY", "engine")


def test_rebinding_assertion_error_is_reported(monkeypatch):
    monkeypatch.setattr(builtins, "AssertionError", Exception)
    with pytest.raises(checks.IntegrityError, match="AssertionError was rebound"):
        checks.padding_tokens(lambda lens: 0)


# ------------------------------------------------------------------------------------ the new schedulers
class DecodeFirst(Policy):
    """The right decode-first policy with one knob for each plausible mistake."""

    count_always = never_force = off_by_one = False

    def __init__(self, batch_size, max_waiting_steps):
        super().__init__(batch_size)
        self.max_waiting_steps, self.waited = max_waiting_steps, 0

    def plan(self, now, more_coming):
        decodes = [decode_work(r) for r in self.running if r.num_prefilled == r.prompt_len]
        room = self.waiting and self.pool.num_free and len(self.running) < self.batch_size
        bound = self.max_waiting_steps + (1 if self.off_by_one else 0)
        if not decodes or (self.waited >= bound and not self.never_force):
            while self.waiting and self.pool.num_free and len(self.running) < self.batch_size:
                r = self.waiting.popleft()
                r.slot = self.pool.claim()
                self.running.append(r)
            self.waited = 0
        elif room or self.count_always:
            self.waited += 1
        return Plan(decodes + [Work(r.slot, r, "prefill", r.num_prefilled, r.prompt_len - r.num_prefilled)
                               for r in self.running if r.num_prefilled < r.prompt_len])


def test_decode_first_right_answer_passes():
    checks.decode_first_policy(DecodeFirst)


def test_decode_first_without_the_bound():
    fails(checks.decode_first_policy, variant(DecodeFirst, never_force=True), "the reference computed", "waiting")


def test_decode_first_counting_steps_without_a_free_slot():
    fails(checks.decode_first_policy, variant(DecodeFirst, count_always=True), "the reference")


def test_decode_first_bound_off_by_one():
    fails(checks.decode_first_policy, variant(DecodeFirst, off_by_one=True), "the reference")


def chunker(prefilling, decodes, chunk_size, budget_total, *, skip_decodes=False, no_chunk=False):
    budget = budget_total - (0 if skip_decodes else decodes)
    out = []
    for prompt_len, done in prefilling:
        n = max(0, min(prompt_len - done, budget) if no_chunk else min(chunk_size, prompt_len - done, budget))
        out.append(n)
        budget -= n
    return out


def test_chunker_right_answer_passes():
    checks.plan_chunks(chunker)


def test_chunker_forgetting_the_decodes():
    fails(checks.plan_chunks, lambda *a: chunker(*a, skip_decodes=True), "decode(s) in the step",
          "your plan_chunks gave")


def test_chunker_without_the_chunk_size():
    fails(checks.plan_chunks, lambda *a: chunker(*a, no_chunk=True), "chunk_size=")


def test_chunker_leaving_out_the_ones_that_get_nothing():
    fails(checks.plan_chunks, lambda *a: [n for n in chunker(*a) if n], "numbers")


class Slabs:
    """The right slab allocator with one knob for each plausible mistake."""

    overcommit = highest_first = accept_double = count_all = False

    def __init__(self, memory_bytes, max_len, bytes_per_token, batch_size):
        self.slab = max_len * bytes_per_token
        self.num_slots = min(batch_size, memory_bytes // self.slab)
        self.free = set(range(self.num_slots))

    @property
    def num_free(self):
        return len(self.free)

    def claim(self):
        if not self.free:
            return self.num_slots if self.overcommit else None
        slot = max(self.free) if self.highest_first else min(self.free)
        self.free.remove(slot)
        return slot

    def release(self, slot):
        if slot in self.free and not self.accept_double:
            raise ValueError(slot)
        self.free.add(slot)

    def held_bytes(self):
        return self.num_slots * self.slab if self.count_all else (self.num_slots - len(self.free)) * self.slab


def test_slab_allocator_right_answer_passes():
    checks.slab_allocator(Slabs)


def test_slab_allocator_that_overcommits():
    fails(checks.slab_allocator, variant(Slabs, overcommit=True), "must refuse")


def test_slab_allocator_handing_out_the_highest_slot():
    fails(checks.slab_allocator, variant(Slabs, highest_first=True), "your claim() returned")


def test_slab_allocator_accepting_a_double_release():
    fails(checks.slab_allocator, variant(Slabs, accept_double=True), "must raise ValueError")


def test_slab_allocator_counting_every_slab_as_held():
    fails(checks.slab_allocator, variant(Slabs, count_all=True), "held_bytes()")


def test_slab_allocator_ignoring_the_batch_size():
    def init(self, memory_bytes, max_len, bytes_per_token, batch_size):
        Slabs.__init__(self, memory_bytes, max_len, bytes_per_token, 10**6)
    fails(checks.slab_allocator, type("NoCap", (Slabs,), {"__init__": init}), "num_slots=")


# ------------------------------------------------------------------------------------------- the self-check
def test_check_here_says_correct_wrong_and_not_attempted(capsys):
    from tinyserve.classroom.check import check_here

    def stub(*args):
        raise NotImplementedError("write your answer here")
    check_here({"padding_tokens": lambda lens: 0, "wasted_fraction": stub}, "7.1")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("✗ 7.1 (a) padding tokens: wrong — for prompts of")
    assert out[1] == "· 7.1 (b) wasted fraction: not attempted"
    assert out[2] == "· 7.1 (c) dynamic batching policy: not attempted"  # not even defined
    assert out[3] == "0 of 3 answers correct (0 of 5 points); 2 not attempted"


def test_check_here_says_a_choice_the_grader_reruns_has_its_form_only(capsys):
    from tinyserve.classroom.check import check_here

    check_here({"my_deployment": lambda: ("disaggregated:1:1", measured("disaggregated:1:1"))}, "7.3")
    out = capsys.readouterr().out.splitlines()
    assert "? 7.3 (o) choose a deployment: right so far (its form): the grader runs it again to grade it" in out
    assert "? 7.3 (o) why that deployment: open question: graded by your teacher (see the rubric they give you)" in out
    assert out[-1] == "0 of 3 answers correct (0 of 6 points); 3 not attempted"  # the form is not a grade


def test_reflect_shows_prediction_answer_and_engine(capsys):
    checks.reflect("wasted", 0.97, lambda outs, b: 0.5, 0.98)
    out = capsys.readouterr().out
    assert "your prediction: 0.97" in out and "your function:   0.5" in out and "your prediction: 0.98" in out
    # By hand: the batch runs 1,999 decode steps (the first token comes from the prefill). All 32 slots: 31 x 1,980
    # wasted of 31 x 1,980 + 1,999 + 31 x 19 computed; the 31 short slots alone: 1,980 wasted of 1,999 each.
    all_slots, short_slots = [float(x) for x in re.findall(r"the engine:\s+([\d.]+)", out)]
    assert all_slots == round(31 * 1980 / (31 * 1980 + 1999 + 31 * 19), 4) == 0.9595
    assert short_slots == round(1980 / 1999, 4) == 0.9905  # the 7.1 notebook's figure, a different denominator
    assert out.index("your prediction: 0.97") < out.index("31 short requests' slots alone") < out.index(
        "your prediction: 0.98")  # each guess beside the share it predicts
    checks.reflect("wasted", 0.97, lambda outs, b: 0.5)  # no second guess written down
    assert capsys.readouterr().out.count("none written down") == 1
    checks.reflect("padding", None, lambda lens: (_ for _ in ()).throw(NotImplementedError()))
    out = capsys.readouterr().out
    assert "none written down" in out and "not written yet" in out and "the engine:      3950" in out


def test_self_check_command_on_a_saved_notebook(tmp_path):
    import subprocess
    import sys

    nb = nbformat.read(ROOT / "chapters" / "solutions" / "7.4-exercises.ipynb", as_version=4)
    for c in nb.cells:
        if c.get("id") == "m-answer":
            c.source = "def kv_bytes_used(p, g, b):\n    return (p + g) * b"
        if c.get("id") == "n-answer":  # handed back as handed out
            c.source = next(e.source for e in nbformat.read(ROOT / "chapters" / "exercises" / "7.4-exercises.ipynb",
                                                            as_version=4).cells if e.get("id") == "n-answer")
    nbformat.write(nb, tmp_path / "mine.ipynb")
    env = dict(__import__("os").environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "tinyserve.classroom.check", str(tmp_path / "mine.ipynb")],
                       capture_output=True, text=True, env=env, timeout=300)
    lines = r.stdout.splitlines()
    assert r.returncode == 1, r.stdout + r.stderr
    assert "✓ 7.4 (l) slabs that fit: correct" in lines
    assert any(ln.startswith("✗ 7.4 (m) KV bytes a sequence holds: wrong — after step") for ln in lines)
    assert "· 7.4 (n) slab allocator: not attempted" in lines
    assert lines[-1] == "1 of 3 answers correct (1 of 5 points); 1 not attempted"
    (tmp_path / "bad.ipynb").write_bytes(b"\xff\xfe{")
    r = subprocess.run([sys.executable, "-m", "tinyserve.classroom.check", str(tmp_path / "bad.ipynb")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "not UTF-8" in r.stdout
