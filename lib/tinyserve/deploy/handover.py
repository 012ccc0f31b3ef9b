"""A deployment's hand-over on an instance's books: the KV pool its policy uses, wrapped (Port's pool argument).

On a prefill instance a finished prompt's slot and K/V stay (kept) until they have landed elsewhere, as in
DistServe (its prefill instance keeps a prompt's blocks until the decode side takes them); on a decode instance the
slot and K/V taken for a transfer on its way (reserved, Port.reserve) wait for it. Both count as used K/V (hold)."""
from __future__ import annotations

from typing import Callable

from ..core.request import FINISHED, Request

# the pool's methods the scheduling path calls, forwarded as the pool's own bound methods: no extra call per use
_FORWARDED = ("claim", "fits", "fitting", "allocate", "grow", "reserved_bytes", "held_bytes", "step_fields",
              "trace_fields", "priced", "runner", "holds", "bytes_per_token", "num_slots")


class Handover:
    """The K/V an instance holds for requests outside its batch: kept (a prefill instance's, whose pool this wraps:
    wrap) and reserved (a decode instance's)."""

    _pool = None  # the pool it wraps (a prefill instance's), set by wrap

    def __init__(self, keep_finished: bool):
        """keep_finished: a prefill instance's, whose finished prompts' K/V wait to be sent."""
        self.keep_finished = keep_finished
        self.kept: dict[str, Request] = {}  # finished prompts whose K/V wait to leave (let_go)
        self.reserved: dict[str, Request] = {}  # transfers on their way here, their slot and K/V taken (Port.reserve)
        self._kept_slots: set[int] = set()

    def wrap(self, pool, hold: Callable[[int], None]) -> Handover:
        """Stand in for the run's KV pool (Port's pool argument); hold(tokens): the run counts K/V positions held
        outside its batch (Scheduler.hold)."""
        self._pool, self._hold = pool, hold
        for name in _FORWARDED:
            setattr(self, name, getattr(pool, name))
        return self

    def __getattr__(self, name: str):
        return getattr(self._pool, name)  # the rest of the pool's interface, read seldom

    @property
    def num_free(self) -> int:
        return self._pool.num_free

    @property
    def preempted(self):
        return self._pool.preempted

    @property
    def step(self) -> int:
        return self._pool.step

    def free(self, r: Request, last_step: int | None = None) -> None:
        """r's K/V leave with it, unless this instance keeps a finished prompt's (and its slot: release)."""
        if self.keep_finished and r.status == FINISHED:
            self.kept[r.id] = r
            self._kept_slots.add(r.slot)
            self._hold(r.prompt_len)
            return
        self._pool.free(r, last_step)

    def release(self, slot: int) -> None:
        """A slot goes back, unless a kept prompt's K/V are in it."""
        if slot not in self._kept_slots:
            self._pool.release(slot)

    def let_go(self, r: Request) -> None:
        """A kept prompt's K/V have left (landed elsewhere, or were never to be sent): freed, with its slot."""
        del self.kept[r.id]
        self._kept_slots.discard(r.slot)
        self._pool.release(r.slot)
        self._pool.free(r)
        self._hold(-r.prompt_len)
