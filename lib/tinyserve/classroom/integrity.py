"""The checks' integrity: an answer may not hand its work to the built-in policies or to the engine, nor disarm
the checks.

While the learner's code runs, the built-in policies (and, for a numeric answer, the engine) are booby-trapped;
an answer may not subclass or copy a built-in policy; the checkers refuse to run if AssertionError was rebound
or an IPython handler swallows exceptions. Messages that start with INTEGRITY say so; the grader reports them
apart. This is a speed bump, not a sandbox (the grader's sandbox is its own process, see grade.py).
"""
from __future__ import annotations

import builtins
import inspect
import sys
from contextlib import contextmanager

from ..core.scheduling import ChunkedPrefill, ContinuousBatching, DynamicBatching, Policy, StaticBatching
from ..engine import Engine
from ..loop import Run
from .text import say


def _genuine_assertion_error() -> type:
    """The interpreter's own AssertionError, whatever the name is bound to now."""
    try:
        assert False  # noqa: B011  (a failing assert raises the C-level class, not the builtins name)
    except BaseException as e:  # noqa: BLE001
        return type(e)


_AE = _genuine_assertion_error()


class IntegrityError(_AE):
    """An answer that bypasses the exercise (delegation, rebinding); reported apart by the grader."""


class NotWritten(_AE):
    """The answer still raises the stub's NotImplementedError: not attempted (the self-check says so)."""


def _fail(msg: str) -> None:
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    raise _AE(msg)


def _integrity(msg: str) -> IntegrityError:
    return IntegrityError(say("integrity", why=msg))


def _guard() -> None:
    """Refuse to check when the checks themselves were disarmed in this kernel."""
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    if builtins.AssertionError is not _AE:
        raise _integrity(say("rebound"))
    ip = sys.modules.get("IPython")
    shell = ip.get_ipython() if ip is not None and hasattr(ip, "get_ipython") else None
    if shell is not None and getattr(shell, "custom_exceptions", ()):
        raise _integrity(say("custom_exc"))


REFERENCES = (StaticBatching, DynamicBatching, ContinuousBatching, ChunkedPrefill)


@contextmanager
def _tripwire(engine: bool):
    """While the learner's code runs: the built-in policies (and, unless engine, the engine) raise IntegrityError."""
    saved = []

    def trap(owner, name, what):
        def tripped(*args, **kwargs):
            raise _integrity(say("called_builtin", what=what))
        saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, tripped)

    for cls in REFERENCES:
        for name, v in list(vars(cls).items()):
            if inspect.isfunction(v):
                trap(cls, name, say("what_builtin", cls=cls.__name__, name=name))
    if not engine:
        trap(Engine, "start", say("what_engine"))
        trap(Run, "step", say("what_run_step"))  # Run.finish steps through it too
    try:
        yield
    finally:
        for owner, name, orig in reversed(saved):
            setattr(owner, name, orig)


def _own_policy_class(cls) -> None:
    """The answer is a Policy subclass written in the notebook, not a built-in one in disguise."""
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        _fail(say("not_policy", got=repr(cls)))
    for ref in REFERENCES:
        if issubclass(cls, ref):
            raise _integrity(say("subclasses_builtin", cls=cls.__name__, ref=ref.__name__))
    ref_codes = {f.__code__: f"{ref.__name__}.{n}" for ref in REFERENCES for n, f in vars(ref).items()
                 if inspect.isfunction(f)}
    for klass in cls.__mro__:
        if klass in (Policy, object):
            break
        for n, f in vars(klass).items():
            if inspect.isfunction(f) and f.__code__ in ref_codes:
                raise _integrity(say("copies_builtin", cls=cls.__name__, name=n, ref=ref_codes[f.__code__]))


def _call(fn, *args, engine: bool = False):
    """Call the learner's function with the built-in policies (and, unless engine, the engine) booby-trapped."""
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    with _tripwire(engine=engine):
        try:
            return fn(*args)
        except NotImplementedError as e:
            raise NotWritten(say("fn_not_written", fn=getattr(fn, "__name__", say("your_function")), err=e)) from None
