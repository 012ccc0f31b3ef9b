"""Links between instances: what a request's KV costs to move from a prefill GPU to a decode GPU.

A link is a preset like the hardware (lib/tinyserve/presets/links/*.json, each citing its sources): one
bandwidth each way and a latency per transfer, so moving n bytes takes latency_s + n / bandwidth_Bps
(transfer_s). How transfers share a link (one at a time, first come first served) is the coordinator's rule
(deploy/), not this file's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TinyserveError
from ..lang import english, t
from .presets import PRESET_DIR, _finite, check_texts, find_preset, list_presets, read_fields

LINK_DIR = PRESET_DIR / "links"


@dataclass
class LinkPreset:
    """A link between two instances: bandwidth one way (bytes/s) and a fixed latency per transfer (s)."""

    name: str
    description: str
    bandwidth_Bps: float  # one direction, bytes/s
    latency_s: float  # fixed cost of each transfer, whatever its size
    sources: list[str]
    details: dict = field(default_factory=dict)  # published numbers, the efficiency assumed

    def text(self, what: str = "description") -> str | list[str]:
        """A text of this link in the learner's language: "description" or "sources" (a list).

        As HardwarePreset.text: the translation (key engine.link.NAME.WHAT) is used only while its English is
        still this link's own text; an edited or user-made link speaks its own words."""
        if what == "sources":
            return [self._says(f"sources.{i}", s) for i, s in enumerate(self.sources)]
        return self._says(what, getattr(self, what))

    def _says(self, what: str, own: str) -> str:
        key = f"engine.link.{self.name}.{what}"
        return t(key) if english(key) == own else own


_NUMBERS = {"bandwidth_Bps": "> 0", "latency_s": ">= 0"}


def load_link(path: str | Path) -> LinkPreset:
    """Read a link JSON file, checking every field (a user may pass their own)."""
    path = Path(path)
    d = read_fields(path, LinkPreset, "engine.link", list(LinkPreset.__dataclass_fields__))
    for k, op in _NUMBERS.items():
        v = d[k]
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v)
        ok = ok and (v > 0 if op == "> 0" else v >= 0)
        if not ok:
            raise TinyserveError(t("engine.link.number", path=path, field=k, op=op, value=v))
        d[k] = float(v)
    check_texts(d, path, "engine.link")
    return LinkPreset(**d)


def list_links() -> list[str]:
    """Names of the shipped links."""
    return list_presets(LINK_DIR)


def get_link(name: str) -> LinkPreset:
    """A shipped link by name, or a FILE.json of the same fields."""
    return find_preset(name, LINK_DIR, load_link, "engine.link.unknown")


def transfer_s(link: LinkPreset, nbytes: float) -> float:
    """Seconds to move nbytes over the link alone: latency_s + nbytes / bandwidth_Bps."""
    return link.latency_s + nbytes / link.bandwidth_Bps
