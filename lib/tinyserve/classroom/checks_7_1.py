"""Checkers of the 7.1 exercises (static and dynamic batching): padding, the wasted fraction, the dynamic policy,
and the predict -> derive -> check reflections."""
from __future__ import annotations

import math
import random

from ..core.request import Request
from ..core.workloads import make_prompt
from . import harness
from .harness import MAX_LEN, _as_int, _check_policy, _engine, _one_thread
from .integrity import NotWritten, _call, _fail, _guard
from .text import say


def _static_run(prompt_lens: list[int], outputs: list[int], batch_size: int, rng: random.Random, dry: bool = False):
    """The static policy's trace of one batch of these prompts and outputs (dry: counts only, no model)."""
    reqs = [Request(f"r{i}", make_prompt(p, seed=rng.randrange(10**6)), o, 0.0, ignore_eos=True)
            for i, (p, o) in enumerate(zip(prompt_lens, outputs))]
    return _engine().run(reqs, "static", batch_size=batch_size, max_model_len=None if dry else MAX_LEN,
                         dry_run=dry, progress=False)


def padding_tokens(fn) -> None:
    """7.1 (a): padding computed by one static prefill."""
    __tracebackhide__ = True
    _guard()
    rng = random.Random(harness.fresh_seed())
    cases = [[rng.randint(1, 40) for _ in range(rng.randint(2, 6))] for _ in range(4)]
    cases += [[rng.randint(1, 40)], [7, 7, 7]]
    with _one_thread():
        for lens in cases:  # the answer first: no truth exists yet for it to find
            got = _as_int(_call(fn, list(lens)), "padding_tokens")
            truth = _static_run(lens, [1] * len(lens), len(lens), rng).metrics()["padding_tokens"]
            if got != truth:
                _fail(say("padding_wrong", lens=lens, truth=truth, got=got))
    print(say("padding_passed", n=len(cases)))


def _wasted_truth(outs: list[int], b: int, rng: random.Random, dry: bool) -> tuple[int, int]:
    m = _static_run([rng.randint(2, 12) for _ in outs], outs, b, rng, dry).metrics()
    return m["decode_tokens"], m["wasted_decode_tokens"]


def wasted_fraction(fn) -> None:
    """7.1 (b): the fastest finisher's wasted fraction."""
    __tracebackhide__ = True
    _guard()
    rng = random.Random(harness.fresh_seed())
    cases = []
    for _ in range(4):
        n = rng.randint(2, 8)
        cases.append(([rng.randint(1, 12) for _ in range(n)], rng.randint(1, 4), False))
    cases.append(([2000] + [20] * 31, 32, True))  # the chapter's case, as a dry run (counts, no model)
    with _one_thread():
        for outs, b, dry in cases:
            got = _call(fn, list(outs), b)
            useful, wasted = _wasted_truth(outs, b, rng, dry)
            truth = wasted / (useful + wasted) if useful + wasted else 0.0
            if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isclose(
                    got, truth, rel_tol=1e-9, abs_tol=1e-12):
                shown = outs if len(outs) <= 10 else say("outs_long", first=outs[0], n=len(outs) - 1, second=outs[1])
                _fail(say("wasted_wrong", outs=shown, b=b, useful=useful, wasted=wasted, truth=truth, got=repr(got)))
    print(say("wasted_passed", n=len(cases)))


def dynamic_policy(cls) -> None:
    """7.1 (c): the dynamic batching launch rule."""
    __tracebackhide__ = True
    _check_policy(cls, "dynamic", say("hint_dynamic"))


# ----------------------------------------------------------------------------------- predict -> derive -> check
# A reflection: (title, the learner's function on the chapter's case, the engine's answer, a second question or
# None). A second question is (its heading, the engine's answer): a share the function does not compute, which
# the learner predicted in a variable of its own.
def _reflect_padding(fn):
    truth = _static_run([50, 4000], [1, 1], 2, random.Random(0), dry=True).metrics()["padding_tokens"]
    return "reflect_padding", (lambda: fn([50, 4000])), truth, None


def _reflect_wasted(fn):
    outs = [2000] + [20] * 31
    tr = _static_run([8] * 32, outs, 32, random.Random(0), dry=True)
    m = tr.metrics()
    truth = m["wasted_decode_tokens"] / (m["decode_tokens"] + m["wasted_decode_tokens"])
    long_slot = next(w.slot for s in tr.steps for w in s.works if w.request_id == "r0")
    mine = [w for s in tr.steps for w in s.works if w.slot != long_slot and w.phase in ("decode", "wasted")]
    share = sum(w.phase == "wasted" for w in mine) / len(mine)
    return "reflect_wasted", (lambda: fn(outs, 32)), round(truth, 4), ("reflect_wasted_short", round(share, 4))


REFLECT = {"padding": _reflect_padding, "wasted": _reflect_wasted}


def reflect(which: str, prediction, fn, second_prediction=None) -> None:
    """Print the learner's prediction beside their function's answer and the engine's, for the chapter's case;
    where the exercise asks a second share, that prediction beside the engine's too (one variable per guess)."""
    with _one_thread():
        title, mine, truth, second = REFLECT[which](fn)
    print(say("reflect_head", title=say(title)))
    _guess(prediction)
    try:
        got = _call(mine)
        print(say("reflect_fn", got=round(got, 4) if isinstance(got, float) else got))
    except (NotWritten, NotImplementedError):
        print(say("reflect_fn_missing"))
    print(say("reflect_engine", truth=truth))
    if second:
        heading, truth2 = second
        print(say("reflect_note", note=say(heading)))
        _guess(second_prediction)
        print(say("reflect_engine", truth=truth2))


def _guess(prediction) -> None:
    print(say("reflect_guess", guess=prediction) if prediction is not None else say("reflect_no_guess"))
