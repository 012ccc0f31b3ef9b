"""One owner of a request's lifecycle: only the Scheduler (core/scheduling/scheduler.py: its methods, and reject
beside it) calls Request's state methods (admit, resume, preempt, finish, abort, reject), as 7.7 says; the Policy
base in the same file does not. Checked at run time: each state method is wrapped to note the file and the
function (qualified name) that called it, and runs that use every transition (every policy, pages that preempt, an abort, rejections,
both kinds of deployment, a real run, a trace read back) must show the Scheduler alone. Also checked in the source:
nothing in lib/ assigns a request's `status` but core/request.py."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tinyserve.core.config import RunConfig
from tinyserve.core.request import Request
from tinyserve.core.tokenizer import BOS
from tinyserve.core.workloads import make_prompt
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.engine import Engine
from tinyserve.trace.record import Trace

LIB = Path(__file__).resolve().parents[2] / "lib" / "tinyserve"
OWNER = LIB / "core" / "scheduling" / "scheduler.py"
BPT = 327_680  # the H200 preset's KV bytes per token (tests/core/test_paged_kv.py)
STATE_METHODS = ("admit", "resume", "preempt", "finish", "abort", "reject")


def _owns(file: str, function: str) -> bool:
    """A call from the Scheduler: a method of the class, or the module's reject (the refused, before a step)."""
    return Path(file).resolve() == OWNER and (function.startswith("Scheduler.") or function == "reject")


@pytest.fixture
def callers(monkeypatch):
    """(method, file, caller's qualified name) for every call of a Request state method while the test runs."""
    seen: set[tuple[str, str, str]] = set()
    for name in STATE_METHODS:
        original = getattr(Request, name)

        def watched(self, *args, _name=name, _original=original, **kwargs):
            code = sys._getframe(1).f_code
            seen.add((_name, code.co_filename, code.co_qualname))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Request, name, watched)
    return seen


def _requests(n: int, seed: int = 0) -> list[Request]:
    return [Request(f"r{i}", make_prompt(8 + 5 * i, seed=seed + i), 6 + i, 0.01 * i, ignore_eos=True)
            for i in range(n)]


def test_only_the_scheduler_calls_the_state_methods(callers):
    eng = Engine()
    for policy in ("static", "dynamic", "continuous", "chunked"):
        eng.run(_requests(6), policy, batch_size=3, dry_run=True, progress=False)
    # pages too few for everyone: the continuous policies preempt and resume
    same = [Request(f"p{i}", [BOS] + [65 + i] * 3, 8, 0.0, ignore_eos=True) for i in range(2)]  # 4 + 8 positions
    tr = eng.run(same, "continuous", batch_size=2, kv_layout="paged", block_size=4, kv_budget=16 * BPT,
                 dry_run=True, progress=False)
    assert tr.metrics()["preemptions"] > 0
    too_long = Request("long", make_prompt(60), 10, ignore_eos=True)  # past max_model_len: rejected
    run = eng.start([*_requests(3), too_long], "continuous", batch_size=2, max_model_len=64, dry_run=True)
    run.step()
    run.abort("r2")
    tr = run.finish(progress=False)
    assert {r.status for r in tr.requests} >= {"finished", "aborted", "rejected"}
    eng.run(_requests(3), "continuous", batch_size=2, progress=False)  # real tokens: EOS may end one
    rc = RunConfig("chunked", dry_run=True, workload_knobs={"rate": 8, "n": 20})
    for dc in (DeploymentConfig("colocated", replicas=2), DeploymentConfig("disaggregated", decode_kv_layout="paged")):
        run_deployment(eng, "chapter-7.3-mixed", rc, dc)
    Trace.from_dict(tr.to_dict())  # a record read back is built whole, not lived
    names = {name for name, _, _ in callers}
    assert names == set(STATE_METHODS), names  # every transition was exercised
    strays = sorted((name, f, fn) for name, f, fn in callers if not _owns(f, fn))
    assert not strays, strays


def test_the_check_can_fail(callers):
    """A state method called from anywhere else is caught (here: this test file)."""
    _requests(1)[0].reject("refused by a test")
    assert any(Path(f).resolve() == Path(__file__).resolve() and not _owns(f, fn) for _, f, fn in callers)
    assert not _owns(str(OWNER), "Policy._preempt") and _owns(str(OWNER), "Scheduler.update")


def test_nothing_in_lib_assigns_a_requests_status_but_request_py():
    strays = []
    for path in LIB.rglob("*.py"):
        if path == LIB / "core" / "request.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                for el in t.elts if isinstance(t, ast.Tuple) else [t]:
                    if isinstance(el, ast.Attribute) and el.attr == "status":
                        strays.append(f"{path.relative_to(LIB)}:{node.lineno}")
    assert not strays, strays
