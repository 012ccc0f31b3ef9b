"""Dynamic batching: static batching whose batch also starts when its oldest request has waited `timeout`."""
from __future__ import annotations

from ..knobs import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S
from .static import StaticBatching


class DynamicBatching(StaticBatching):
    """Static batching whose batch also launches when the first waiting request has waited `timeout`."""

    name = "dynamic"
    takes = ("timeout",)  # its knobs beyond batch_size (RunConfig checks them: core/config.py)

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, timeout: float = DEFAULT_TIMEOUT_S):
        super().__init__(batch_size, timeout)
