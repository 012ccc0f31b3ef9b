"""A run's settings, without torch: the tiny GPT's shape (GPTConfig) and every knob of a run (RunConfig), each
knob checked once, here. A dry run plans with these and never loads torch (importing torch is most of a fresh
kernel's first dry run: benchmarks/startup.py)."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields

from ..errors import TinyserveError
from ..lang import t
from .blocks import DEFAULT_BLOCK_SIZE, PagedPool
from .knobs import DEFAULT_BATCH_SIZE, POLICY_KNOBS, UNBOUNDED
from .kv import RunKV, SlotPool, plan_slabs

# a layout test, the one kept: a run's kv_layout names its pool here, and every other module asks that pool
POOLS = {"slab": SlotPool, "paged": PagedPool}  # KV layouts: core/kv.py (slabs), core/blocks.py (pages)
LAYOUTS = tuple(POOLS)
LAYOUT_KNOBS = ("block_size",)  # knobs of a layout's own (its pool's `knobs`), RunConfig fields
FROM_CONFIG = "<the config's policy>"  # Engine.start's policy when none is given: RunConfig.of keeps the config's
POLICY_OBJECT = "<a Policy object>"  # RunConfig.policy when the run is given a policy object, not a name


# ---- the one rule of each policy knob (their names and defaults: knobs.py) ----------------------------------
def check_int(name: str, value, lo: int) -> int:
    """An integer >= lo (a whole float such as 2.0 becomes 2), or the one message naming the knob."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TinyserveError(t("engine.knob.integer", name=name, lo=lo, value=value))
    if value < lo:
        raise TinyserveError(t("engine.knob.at_least", name=name, lo=lo, value=value))
    return value


def _positive(name: str, value) -> int:
    return check_int(name, value, 1)


def _timeout(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise TinyserveError(t("engine.knob.timeout", value=value))
    return float(value)


def _flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TinyserveError(t("engine.knob.prefill_first", value=value))
    return value


def _waiting(name: str, value) -> int | float:
    if value == UNBOUNDED:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            float(value).is_integer() and value >= 0):
        raise waiting_steps_error(value)
    return int(value)


# every policy knob and its rule, batch_size first (every policy takes it); the others in POLICY_KNOBS' order
RULES = {"batch_size": _positive, "timeout": _timeout, "chunk_size": _positive, "max_batch_tokens": _positive,
         "prefill_first": _flag, "max_waiting_steps": _waiting}


def check_knob(name: str, value):
    """The one rule of each policy knob: the value as the policy stores it, or a TinyserveError naming the knob."""
    if name not in RULES:
        raise TinyserveError(f"{name}: not a policy knob")  # words: ok (a bug, not user input)
    return RULES[name](name, value)


def waiting_steps_error(value) -> TinyserveError:
    """The one message for a bad max_waiting_steps."""
    return TinyserveError(t("engine.knob.max_waiting_steps", value=value))


def check_token_budget(batch_size: int, max_batch_tokens: int) -> None:
    """Chunked prefill's budget must leave room for every slot's decode."""
    if max_batch_tokens < batch_size:
        raise TinyserveError(t("engine.knob.token_budget", batch_size=batch_size, max_batch_tokens=max_batch_tokens))


def pool_class(layout: str) -> type:
    """The KV pool class a layout's name names (SlotPool, PagedPool), or the one message listing the layouts."""
    pool = POOLS.get(layout)
    if pool is None:
        raise TinyserveError(t("engine.kv.layout", layout=layout, choices=", ".join(LAYOUTS)))
    return pool


def policy_classes() -> dict[str, type]:
    """The policies a run may name, each as its class declares itself (its `name` and the knobs it `takes`):
    core/scheduling/registry.py, in the chapter's order."""
    from .scheduling.registry import POLICY_CLASSES  # here, not above: the scheduling package imports RunConfig

    return POLICY_CLASSES


def users(knob: str) -> str:
    """The named policies that take a knob, in words ("static and dynamic"), as their classes declare it."""
    return t("engine.and").join(p for p, c in policy_classes().items() if knob in c.takes)


def takes(policy: str) -> tuple[str, ...]:
    """The knobs beyond batch_size a named policy takes (its class's declaration); () for an unknown name."""
    cls = policy_classes().get(policy)
    return cls.takes if cls is not None else ()


def check_policy_object(p) -> None:
    """A policy object's own knobs, by the same rules, once per run (objects built directly, e.g. ChunkedPrefill(2, 0))."""
    check_knob("batch_size", p.batch_size)
    if getattr(p, "timeout", None) is not None:
        check_knob("timeout", p.timeout)
    for knob in ("chunk_size", "max_batch_tokens"):
        if hasattr(p, knob):
            check_knob(knob, getattr(p, knob))
    if hasattr(p, "chunk_size") and hasattr(p, "max_batch_tokens"):  # chunked prefill's budget
        check_token_budget(p.batch_size, p.max_batch_tokens)
    w = getattr(p, "max_waiting_steps", 0)
    if isinstance(w, float) and w != UNBOUNDED:  # a policy stores an int or inf (2.0 from a name became 2)
        raise waiting_steps_error(w)
    check_knob("max_waiting_steps", w)


def check_gpus(value) -> int:
    """GPUs of one instance (tensor parallel, cost/tensor.py): an integer >= 1. What a preset allows is checked
    where the preset is read (cost.tensor.tensor_parallel)."""
    return check_int("gpus", value, 1)


def check_dtype(dtype: str) -> str:
    """The model's dtype by name (an engine setting, checked before anything loads)."""
    if dtype not in DTYPE_BYTES:
        raise TinyserveError(t("engine.knob.dtype", dtype=dtype, choices=", ".join(DTYPE_BYTES)))
    return dtype


def check_device(device: str) -> str:
    """A device by name, without torch (whether cuda is there only torch knows: model.gpt.resolve_device)."""
    if device not in DEVICES:
        raise TinyserveError(t("engine.device.unknown", device=device))
    return device


def check_load_dtype(dtype: str) -> str:
    """The dtype a checkpoint is loaded in, by name, without torch (model.gpt.resolve_dtype's own words)."""
    if dtype not in DTYPE_BYTES:
        raise TinyserveError(t("engine.dtype.unknown", dtype=dtype))
    return dtype


def threads_setting() -> int | str:
    """TINYSERVE_THREADS: 'auto' (the default), 'off' (also 0, no, false) or a positive number of threads (an engine
    setting read from the environment, checked before anything loads: tinyserve/threads.py applies it)."""
    raw = os.environ.get("TINYSERVE_THREADS", "auto")
    v = raw.strip().lower()
    if v in ("", "auto"):
        return "auto"
    if v in ("off", "0", "no", "false"):
        return "off"
    if v.isdigit() and int(v) > 0:
        return int(v)
    raise TinyserveError(t("engine.threads", raw=raw))


@dataclass(frozen=True)
class RunConfig:
    """Every knob of a run, checked once when it is made (the API, the CLI and the engine build one).

    A policy knob left None takes the policy's default; a knob given to a policy it does not apply to is an error.
    policy POLICY_OBJECT: the run uses a policy object, whose own fields are its knobs (check_policy), so none is
    given here.
    """

    policy: str = "continuous"
    batch_size: int | None = None
    timeout: float | None = None
    chunk_size: int | None = None
    max_batch_tokens: int | None = None
    prefill_first: bool | None = None
    max_waiting_steps: int | float | None = None
    clock: str = "modeled"
    hardware: str | None = None
    kv_budget: int | None = None
    max_model_len: int | None = None
    dry_run: bool = False
    seed: int = 0
    workload_knobs: dict | None = None
    slab: str = "max_model_len"  # every slot's slab: the server's maximum length, or "longest" (a what-if)
    kv_layout: str = "slab"  # "slab": one max-length slab per slot; "paged": a block pool (core/blocks.py)
    block_size: int | None = None  # positions per block, paged only (None: DEFAULT_BLOCK_SIZE, vLLM's 16)
    # GPUs of one instance, the model split over them (tensor parallel, modeled clock only: cost/tensor.py); None:
    # the preset as it is. Every instance of a deployment takes it (colocated replicas the same way)
    gpus: int | None = None
    # the policy object when the run is given one (policy is then POLICY_OBJECT): not a knob, never compared
    policy_object: object = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.policy_object is not None:
            object.__setattr__(self, "policy", POLICY_OBJECT)
        if self.policy != POLICY_OBJECT:
            self._check_policy_knobs()
        elif self.batch_size is not None or any(getattr(self, k) is not None for k in POLICY_KNOBS):
            raise TinyserveError(t("engine.knob.policy_object"))
        self._check_run_knobs()

    def _check_policy_knobs(self) -> None:
        classes = policy_classes()
        if self.policy not in classes:
            raise TinyserveError(t("engine.knob.policy_unknown", policy=self.policy, choices=", ".join(classes)))
        own = classes[self.policy].takes
        for knob in POLICY_KNOBS:
            if getattr(self, knob) is not None and knob not in own:
                raise TinyserveError(t("engine.knob.not_for_policy", knob=knob, policy=self.policy,
                                       users=users(knob)))
        set_ = object.__setattr__  # frozen: normalised values are set once, here
        set_(self, "batch_size", check_knob("batch_size", DEFAULT_BATCH_SIZE if self.batch_size is None
                                             else self.batch_size))
        for knob in own:  # in POLICY_KNOBS' order
            if getattr(self, knob) is not None:
                set_(self, knob, check_knob(knob, getattr(self, knob)))
        if self.max_batch_tokens is not None:
            check_token_budget(self.batch_size, self.max_batch_tokens)
        if self.max_waiting_steps is not None:  # the two ways of saying it must agree
            from .scheduling.continuous import waiting_steps  # the policy's own rule (its package imports RunConfig)

            waiting_steps(self.prefill_first, self.max_waiting_steps)

    def _check_run_knobs(self) -> None:
        kv = self.kv_budget
        if kv is not None and (isinstance(kv, bool) or not isinstance(kv, int) or kv < 1):
            raise TinyserveError(t("engine.knob.kv_budget", value=kv))
        if self.clock == "wall" and self.hardware is not None:
            raise TinyserveError(t("engine.knob.hardware_wall"))
        if self.clock not in ("modeled", "wall"):
            raise TinyserveError(t("engine.knob.clock", clock=self.clock))
        if self.dry_run and self.clock != "modeled":
            raise TinyserveError(t("engine.knob.dry_run"))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TinyserveError(t("engine.knob.seed", value=self.seed))
        if self.slab not in ("max_model_len", "longest"):
            raise TinyserveError(t("engine.knob.slab", choices="max_model_len, longest", value=self.slab))
        pool = pool_class(self.kv_layout)
        for knob in LAYOUT_KNOBS:  # each checked as the pool that takes it declares it (None: left out, its default)
            value = getattr(self, knob)
            if knob in pool.knobs:
                object.__setattr__(self, knob, check_int(knob, pool.knobs[knob] if value is None else value, 1))
            elif value is not None:  # given to a layout that takes no such knob
                raise TinyserveError(t("engine.kv.block_size_slab"))
        if self.gpus is not None:
            object.__setattr__(self, "gpus", check_gpus(self.gpus))
            if self.clock == "wall":
                raise TinyserveError(t("engine.knob.gpus_wall"))
        if self.workload_knobs is not None and not isinstance(self.workload_knobs, dict):
            raise TinyserveError(t("engine.knob.workload_knobs", value=self.workload_knobs))

    @classmethod
    def for_object(cls, class_name: str, policy_knobs: dict, **run_knobs) -> RunConfig:
        """The config of a run given a policy object (its own fields are its knobs: check_policy_object), refusing
        policy knobs given beside it."""
        given = [k for k, v in policy_knobs.items() if v is not None]
        if given:
            raise TinyserveError(t("engine.knob.on_object", knob=given[0], cls=class_name))
        return cls(POLICY_OBJECT, **run_knobs)

    @classmethod
    def of(cls, policy=FROM_CONFIG, config: RunConfig | None = None, knobs: dict | None = None) -> RunConfig:
        """The config of a run from a policy (a name, a policy object, or FROM_CONFIG or None: the config's, else
        continuous), a config and knobs on top of it, each a RunConfig field (checked here, once): the engine's
        one way in."""
        knobs = dict(knobs or {})
        unknown = [k for k in knobs if k not in RUN_FIELDS or k == "policy_object"]
        if unknown:  # as Python says it of any function
            raise TypeError("unexpected keyword argument " + repr(unknown[0]))  # words: ok (Python's own)
        base = {f.name: getattr(config, f.name) for f in fields(cls)} if config is not None else {}
        if policy is FROM_CONFIG or policy is None:
            pass
        elif not isinstance(policy, str):  # an object: its own fields are its knobs
            cls.for_object(type(policy).__name__, {k: knobs.get(k) for k in ("batch_size",) + POLICY_KNOBS})  # refuses
            base.update(policy=POLICY_OBJECT, policy_object=policy,
                        **{k: None for k in POLICY_KNOBS + ("batch_size",)})
        else:
            base.update(policy=policy, policy_object=None)
        return cls(**{**base, **knobs})

    def build_policy(self):
        """The run's policy: the object it was given, else the one its name names, built with the knobs its class
        takes (those left None: its defaults)."""
        if self.policy_object is not None:
            return self.policy_object
        cls = policy_classes()[self.policy]
        return cls(self.batch_size, **{k: getattr(self, k) for k in cls.takes if getattr(self, k) is not None})

    def context_limit(self, n_positions: int) -> int:
        """The longest sequence a run admits: max_model_len if given (at most the model's context), else the context."""
        m = self.max_model_len
        if m is None:
            return n_positions
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= n_positions:
            raise TinyserveError(t("engine.knob.max_model_len", limit=n_positions, value=m))
        return m

    def policy_knobs(self) -> dict:
        """The policy's knobs as given (None: its default), batch_size included; {} for a policy object."""
        if self.policy == POLICY_OBJECT:
            return {}
        return {"batch_size": self.batch_size, **{k: getattr(self, k) for k in takes(self.policy)}}

    def to_dict(self) -> dict:
        """Every knob (JSON-able but for math.inf, written as None)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "policy_object"}
        if d["max_waiting_steps"] == UNBOUNDED:
            d["max_waiting_steps"] = None
        return d


RUN_FIELDS = tuple(f.name for f in fields(RunConfig))

DTYPE_BYTES = {"float32": 4, "float64": 8, "bfloat16": 2}  # bytes per element, for KV sizes
DEVICES = ("auto", "cpu", "cuda")


@dataclass
class GPTConfig:
    """Shape of the model; the defaults are the shipped checkpoint's."""

    vocab_size: int = 258  # 256 bytes + BOS + EOS
    n_positions: int = 4096  # long enough for the chapter's 4,000-token prompts
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for k in ("vocab_size", "n_positions", "n_layer", "n_head", "n_embd"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(t("engine.model.positive", name=k, value=v))
        if self.n_embd % self.n_head:
            raise ValueError(t("engine.model.heads", n_embd=self.n_embd, n_head=self.n_head))
        eps = self.layer_norm_eps
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
            raise ValueError(t("engine.model.eps", value=eps))

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def layout_kv(hw, cfg: GPTConfig, requests: list, batch_size: int, dtype, config: RunConfig) -> RunKV:
    """The run's KV, of the layout config names: hw is the modeled clock's preset (None under the wall clock), cfg
    the model's shape (GPTConfig), dtype the model's (a torch dtype or, on dry runs, its name)."""
    size = DTYPE_BYTES[dtype] if isinstance(dtype, str) else dtype.itemsize
    plan = plan_slabs(hw, cfg.n_layer, cfg.n_embd, size, str(dtype).removeprefix("torch."), cfg.n_positions,
                      config.kv_budget, config.max_model_len, config.slab)
    # the one place a layout is chosen by its name (POOLS; RunConfig checked it): every other module calls the pool
    return pool_class(config.kv_layout).lay_out(plan, requests, batch_size, config)
