"""A deployment's shape (DeploymentConfig), checked once, and the rules it puts on a run's knobs."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..core.config import RunConfig
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

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TinyserveError(t("engine.deploy.kind", kind=self.kind, choices=", ".join(KINDS)))
        set_ = object.__setattr__  # frozen: defaults filled in once, here
        if self.kind == "colocated":
            for option, v in (("--prefill-instances", self.prefill_instances),
                              ("--decode-instances", self.decode_instances), ("--link", self.link)):
                if v is not None:
                    raise TinyserveError(t("engine.deploy.disaggregated_only", option=option))
            set_(self, "replicas", _count("--replicas", 1 if self.replicas is None else self.replicas))
        else:
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

    def to_dict(self) -> dict:
        """Every field (the JSON's `deployment` block)."""
        return asdict(self)
