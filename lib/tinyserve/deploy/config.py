"""A deployment's shape (DeploymentConfig), checked once, and the rules it puts on a run's knobs."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from ..core.config import LAYOUTS, RunConfig
from ..core.scheduling.registry import DECODE_POLICIES
from ..errors import TinyserveError
from ..lang import t

KINDS = ("colocated", "disaggregated")
DEFAULT_LINK = "nvlink-h200"
# the options each kind takes beside `kind` (the other kind's are refused, each by its CLI option's name)
OPTIONS = {"colocated": ("replicas",),
           "disaggregated": ("prefill_instances", "decode_instances", "link", "decode_kv_layout", "prefill_chunk_size",
                             "decode_batch_size", "prefill_gpus", "decode_gpus")}
WHOLE = "none"  # --prefill-chunk-size none: whole prompts
# the token budget of a prefill step of whole prompts: vLLM's max_num_batched_tokens without chunked prefill,
# max(max_model_len, 2048), with the presets' max_model_len of 4,096
WHOLE_PROMPT_BUDGET = 4096


def _option(name: str) -> str:
    """A field's CLI option (prefill_gpus: --prefill-gpus)."""
    return "--" + name.replace("_", "-")


def _count(option: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TinyserveError(t("engine.deploy.count", option=option, value=value))
    return value


@dataclass(frozen=True)
class DeploymentConfig:
    """colocated: `replicas` engines; disaggregated: `prefill_instances` + `decode_instances` joined by `link`."""

    kind: str = "colocated"
    replicas: int | None = None
    prefill_instances: int | None = None
    decode_instances: int | None = None
    link: str | None = None
    decode_kv_layout: str | None = None  # the decode instances' KV layout (None: the run's): slab or paged
    # per-role knobs (None: the run's). prefill_chunk_size: the prefill instances' chunk, or "none": whole prompts
    # under a token budget per step (WHOLE_PROMPT_BUDGET unless --max-batch-tokens); decode_batch_size: the decode
    # instances' slots; prefill_gpus / decode_gpus: each instance's GPUs (tensor parallel, RunConfig.gpus)
    prefill_chunk_size: int | str | None = None
    decode_batch_size: int | None = None
    prefill_gpus: int | None = None
    decode_gpus: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TinyserveError(t("engine.deploy.kind", kind=self.kind, choices=", ".join(KINDS)))
        set_ = object.__setattr__  # frozen: defaults filled in once, here
        if self.kind == "colocated":
            for name in OPTIONS["disaggregated"]:
                if getattr(self, name) is not None:
                    raise TinyserveError(t("engine.deploy.disaggregated_only", option=_option(name)))
            set_(self, "replicas", _count("--replicas", 1 if self.replicas is None else self.replicas))
        else:
            if self.decode_kv_layout is not None and self.decode_kv_layout not in LAYOUTS:
                raise TinyserveError(t("engine.kv.layout", layout=self.decode_kv_layout, choices=", ".join(LAYOUTS)))
            for name in OPTIONS["colocated"]:
                if getattr(self, name) is not None:
                    raise TinyserveError(t("engine.deploy.colocated_only", option=_option(name)))
            set_(self, "prefill_instances", _count("--prefill-instances", 1 if self.prefill_instances is None
                                                   else self.prefill_instances))
            set_(self, "decode_instances", _count("--decode-instances", 1 if self.decode_instances is None
                                                  else self.decode_instances))
            c = self.prefill_chunk_size
            if c is not None and c != WHOLE and (isinstance(c, bool) or not isinstance(c, int) or c < 1):
                raise TinyserveError(t("engine.deploy.prefill_chunk", value=c))
            for option, name in (("--decode-batch-size", "decode_batch_size"), ("--prefill-gpus", "prefill_gpus"),
                                 ("--decode-gpus", "decode_gpus")):
                if getattr(self, name) is not None:
                    _count(option, getattr(self, name))
            from ..cost.links import get_link

            get_link(DEFAULT_LINK if self.link is None else self.link)  # an unknown link: one clear line now
            set_(self, "link", DEFAULT_LINK if self.link is None else self.link)

    @staticmethod
    def options(kind: str) -> tuple[str, ...]:
        """The fields a kind of deployment takes beside `kind` (OPTIONS; the others must be left None)."""
        return OPTIONS[kind]

    @property
    def num_instances(self) -> int:
        """Engines the deployment runs (each on the hardware preset's GPUs)."""
        return self.replicas if self.kind == "colocated" else self.prefill_instances + self.decode_instances

    def check_run(self, rc: RunConfig) -> None:
        """The run knobs a deployment cannot take: one clear line each."""
        if rc.clock != "modeled":  # one CPU cannot run several instances in parallel: only modeled time can
            raise TinyserveError(t("engine.deploy.wall"))
        if self.kind == "disaggregated":
            if rc.policy not in DECODE_POLICIES:
                raise TinyserveError(t("engine.deploy.policy", policy=rc.policy, choices=", ".join(DECODE_POLICIES)))
            if rc.prefill_first is not None or rc.max_waiting_steps is not None:
                raise TinyserveError(t("engine.deploy.waiting"))
            from ..cost.clock import make_clock

            for option, n in (("--prefill-gpus", self.prefill_gpus), ("--decode-gpus", self.decode_gpus)):
                if n is not None:  # what the preset allows (its node, its KV heads): named by the role's option
                    try:
                        make_clock(rc.clock, rc.hardware, n)
                    except TinyserveError as e:
                        raise TinyserveError(t("engine.deploy.role_gpus", option=option, value=n, message=e)) from None

    def decode_config(self, rc: RunConfig) -> RunConfig:
        """The decode instances' RunConfig: the run's, in their own KV layout if one is given (their K/V arrive
        from the prefill instances' layout, converted: ModelRunner.export_kv / import_kv), with their own batch
        size and GPUs if given."""
        layout = self.decode_kv_layout
        # a layout test kept: two layouts compared (a change of layout drops the other's block size), none named
        if layout is not None and layout != rc.kv_layout:
            rc = replace(rc, kv_layout=layout, block_size=None)
        if self.decode_batch_size is not None:
            rc = replace(rc, batch_size=self.decode_batch_size,
                         max_batch_tokens=None if rc.max_batch_tokens is None
                         else max(rc.max_batch_tokens, self.decode_batch_size))
        return rc if self.decode_gpus is None else replace(rc, gpus=self.decode_gpus)

    def prefill_config(self, rc: RunConfig) -> RunConfig:
        """A prefill instance's RunConfig: the run's, with its own chunk (chunked prefill of that length, or whole
        prompts under a token budget: a policy object of its own, one per instance) and GPUs if given."""
        if self.prefill_gpus is not None:
            rc = replace(rc, gpus=self.prefill_gpus)
        c = self.prefill_chunk_size
        if c is None:
            return rc
        if c == WHOLE:
            from ..core.scheduling.variants import WholePromptBudget

            budget = rc.max_batch_tokens if rc.max_batch_tokens is not None else WHOLE_PROMPT_BUDGET
            return RunConfig.of(WholePromptBudget(rc.batch_size, budget), rc)
        budget = rc.max_batch_tokens if rc.policy == "chunked" else None
        return replace(rc, policy="chunked", chunk_size=c, max_batch_tokens=budget, prefill_first=None,
                       max_waiting_steps=None)

    def to_dict(self) -> dict:
        """Every field (the JSON's `deployment` block)."""
        return asdict(self)
