"""A deployment's shape (DeploymentConfig), checked once, and the rules it puts on a run's knobs."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from ..core.config import LAYOUTS, RunConfig
from ..errors import TinyserveError
from ..lang import t

KINDS = ("colocated", "disaggregated")
DECODE_POLICIES = ("continuous", "chunked")  # a decode instance admits prefilled requests as they come
DEFAULT_LINK = "nvlink-h200"


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


    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TinyserveError(t("engine.deploy.kind", kind=self.kind, choices=", ".join(KINDS)))
        set_ = object.__setattr__  # frozen: defaults filled in once, here
        if self.kind == "colocated":
            for option, v in (("--prefill-instances", self.prefill_instances),
                              ("--decode-instances", self.decode_instances), ("--link", self.link),
                              ("--decode-kv-layout", self.decode_kv_layout)):
                if v is not None:
                    raise TinyserveError(t("engine.deploy.disaggregated_only", option=option))
            set_(self, "replicas", _count("--replicas", 1 if self.replicas is None else self.replicas))
        else:
            if self.decode_kv_layout is not None and self.decode_kv_layout not in LAYOUTS:
                raise TinyserveError(t("engine.kv.layout", layout=self.decode_kv_layout, choices=", ".join(LAYOUTS)))
            if self.replicas is not None:
                raise TinyserveError(t("engine.deploy.colocated_only", option="--replicas"))
            set_(self, "prefill_instances", _count("--prefill-instances", 1 if self.prefill_instances is None
                                                   else self.prefill_instances))
            set_(self, "decode_instances", _count("--decode-instances", 1 if self.decode_instances is None
                                                  else self.decode_instances))
            from ..cost.links import get_link

            get_link(DEFAULT_LINK if self.link is None else self.link)  # an unknown link: one clear line now
            set_(self, "link", DEFAULT_LINK if self.link is None else self.link)

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

    def decode_config(self, rc: RunConfig) -> RunConfig:
        """The decode instances' RunConfig: the run's, in their own KV layout if one is given (their K/V arrive
        from the prefill instances' layout, converted: ModelRunner.export_kv / import_kv)."""
        layout = self.decode_kv_layout
        if layout is None or layout == rc.kv_layout:
            return rc
        return replace(rc, kv_layout=layout, block_size=None)

    def to_dict(self) -> dict:
        """Every field (the JSON's `deployment` block)."""
        return asdict(self)
