"""The policies a run names. Each declares itself in its own file (its `name`, the knobs it `takes`); a new one is
its file and one line here. The papers' variants (variants.py) are policy objects for the gallery, not named."""
from __future__ import annotations

from .chunked import ChunkedPrefill
from .continuous import ContinuousBatching
from .dynamic import DynamicBatching
from .static import StaticBatching

POLICY_CLASSES = {cls.name: cls for cls in (StaticBatching, DynamicBatching, ContinuousBatching, ChunkedPrefill)}
# the policies a deployment's decode instance runs: those that admit prefilled requests as they come
DECODE_POLICIES = tuple(name for name, cls in POLICY_CLASSES.items() if cls.admits_prefilled)
