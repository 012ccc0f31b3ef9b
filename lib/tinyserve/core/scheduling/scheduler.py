"""The Scheduler, owner of a request's lifecycle (vLLM's Scheduler, nano-vllm's schedule/postprocess), and what
it asks each step: a policy's plan (Plan, and Policy, what every policy shares: the queue and the slots it keeps,
how a request enters a slot and leaves it). The policies themselves (one file each, beside this one) only decide
who computes what.

A learner writes a policy the same way: subclass Policy, write plan(now, more_coming) (and finished(r) if the
policy holds slots differently). The Scheduler asks it for each step's plan and applies the step's results:
statuses, the stop rule, slots and KV freed, the K/V held. Nobody else changes a request's state: only the
Scheduler (and reject, beside it) calls its state methods (admit, resume, preempt, finish, abort, reject); a
policy moves requests between its queue and its slots, never their status.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import islice

from ...errors import TinyserveError
from ...lang import t
from ..knobs import DEFAULT_BATCH_SIZE
from ..kv import SlotPool
from ..request import WAITING, Request, Work
from ..tokenizer import EOS


@dataclass
class Plan:
    """This step's works; when there are none, wake_s is when the policy wants to be asked again."""

    works: list[Work]
    wake_s: float | None = None


class Policy:
    """The queue and the slots; subclasses decide who computes what (plan)."""

    name = ""
    takes: tuple[str, ...] = ()  # knobs beyond batch_size (a named policy declares its own)
    admits_prefilled = False  # whether a deployment's decode instance can run it

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE):
        self.batch_size = batch_size
        self.waiting: deque[Request] = deque()  # arrived, no slot yet (FIFO)
        self.running: list[Request] = []  # holding a slot, in admission order
        self.pool: SlotPool | None = None

    def bind(self, pool: SlotPool) -> None:
        """Start a run on these slots with empty queues (refused while an earlier run still has work here)."""
        left = len(self.waiting) + sum(not r.done for r in self.running)
        if self.pool is not None and left:
            raise TinyserveError(t("engine.policy.busy", cls=type(self).__name__, left=left))
        self.pool = pool
        self.waiting.clear()
        self.running.clear()

    def add(self, req: Request) -> None:
        """A request has arrived: it waits at the back of the queue."""
        self.waiting.append(req)

    def plan(self, now: float, more_coming: bool) -> Plan:
        """What to compute in the next step at time `now`; more_coming: requests are still to arrive."""
        raise NotImplementedError

    def finished(self, req: Request) -> None:
        """A request is done (finished or aborted): free what it holds."""
        i = _position(self.running, req)
        if i >= 0:
            del self.running[i]
            self._free(req)
        elif req in self.waiting:
            self.waiting.remove(req)

    def knobs(self) -> dict:
        """The settings this policy ran with (recorded in the trace)."""
        return {"batch_size": self.batch_size}

    def grow(self, step: int) -> None:
        """Before step `step` is planned: the pool gives every decoding request room for its next position; when
        it has none (pages run out), the most recently admitted request is preempted (vLLM v1's rule under FCFS:
        the oldest keep making progress, so every request finishes). Slabs always have room."""
        self.pool.grow(step, self.running, self._preempt)

    def _claim(self, req: Request) -> None:
        """req enters a slot; the pool takes what its prefill needs (a preempted request, all it had)."""
        req.slot = self.pool.claim()
        self.running.append(req)
        if not self.pool.allocate(req, req.prefill_len + (req.num_prefilled > 0)):
            raise RuntimeError(f"no KV for {req.id}'s prefill")  # words: ok (a policy bug: admission asks fits())

    def _free(self, req: Request, last_step: int | None = None) -> None:
        self.pool.free(req, last_step)  # its K/V, then its slot: a pool that keeps the K/V keeps the slot too
        self.pool.release(req.slot)

    def _preempt(self, r: Request) -> None:
        """Take r out: its KV and slot go back and it waits at the queue's front (the Scheduler marks it preempted:
        it recomputes its prompt and every token it made when admitted again)."""
        self.running.remove(r)
        self._free(r, self.pool.step - 1)  # held through the previous step
        self.pool.preempted.append(r.id)
        self.waiting.appendleft(r)

    def _admits(self) -> bool:
        """A waiting request may enter now: a free slot, room under the batch size, KV for its prefill, and no
        preemption in this step (vLLM v1 admits nobody in a step that preempted: the blocks were just short)."""
        if not self.waiting:
            return False
        return bool(self.pool.num_free and len(self.running) < self.batch_size
                    and self.pool.fits(self.waiting[0]) and not self.pool.preempted)


def _position(requests: list[Request], req: Request) -> int:
    """Where req itself is in the list (-1: absent). By identity: `in` and remove() call Request.__eq__, a dataclass
    comparing every field, for each request ahead of it (ids are unique, so identity is equality here)."""
    for i, r in enumerate(requests):
        if r is req:
            return i
    return -1


def decode_work(r: Request) -> Work:
    """The next decode of r: feed its last token at the next position."""
    return Work(r.slot, r, "decode", r.num_prefilled + len(r.output) - 1, 1)  # len(): runs per slot per step


def decodes_of(requests: list[Request]) -> list[Work]:
    """decode_work of each request whose prompt is in, in order: one list comprehension, no call per request (it
    runs for every slot of every step: the call was a sixth of a continuous dry run's time)."""
    return [Work(r.slot, r, "decode", r.num_prefilled + len(r.output) - 1, 1)  # as decode_work
            for r in requests if r.num_prefilled == r.prefill_len]


def reject(refused: list[tuple[Request, str]]) -> None:
    """Reject each (request, why) that can never be served, alone, with its reason."""
    for r, why in refused:
        r.reject(why)


class Scheduler:
    """One run's requests around a policy and a KV pool: schedule(now) -> plan; update(plan, tokens, start, end)
    -> the requests that finished."""

    def __init__(self, policy: Policy, pool, dry_run: bool):
        self.policy, self.pool, self.dry_run = policy, pool, dry_run
        self.kv_used_tokens = 0  # K/V tokens the slot holders keep: tallied by update, re-summed when one leaves
        self.held_outside = 0  # K/V positions held for requests outside the batch (hold: a deployment's hand-over)
        self.preempted_once = False  # a request has been preempted (so some prefills are recomputes)
        self.step_kv: tuple = (0, 0, {})  # the last step's KV as the trace records it: reserved, used bytes, blocks
        self.entering: list[Request] = []  # handed over holding their slot and K/V: they join at the next step
        self.requeued: list[Request] = []  # preempted, waiting to be given a slot again
        policy.bind(pool)

    @property
    def busy(self) -> bool:
        """Requests are waiting or hold a slot."""
        return bool(self.policy.waiting or self.policy.running or self.entering)

    def add(self, r: Request) -> None:
        """r has arrived."""
        self.policy.add(r)

    def enter(self, r: Request) -> None:
        """r has arrived holding the slot and K/V taken for it (reserve): it joins the batch at the next step,
        ahead of the queue, and decodes at once."""
        self.entering.append(r)

    def begin_step(self, index: int) -> None:
        """Before step `index` is planned: the pool gives each decoding request room for its next position (pages
        may run out: then the policy preempts, and who left took their K/V with them); then those handed over with
        their K/V join the batch."""
        self.policy.grow(index)
        preempted = self.pool.preempted
        if preempted:
            for r in islice(self.policy.waiting, len(preempted)):  # the policy put each at the queue's front
                r.preempt()
                self.requeued.append(r)
            self.recount()
            self.preempted_once = True
        if self.entering:
            self.policy.running += self.entering
            self.entering.clear()
            self.recount()

    def schedule(self, now: float, more_coming: bool) -> Plan:
        """The policy's plan for the step starting at `now`; a preempted request it gave a slot runs again."""
        plan = self.policy.plan(now, more_coming)
        if self.requeued:
            self._resume()
        return plan

    def _resume(self) -> None:
        """Each preempted request the plan gave a slot again is running again; the rest still wait."""
        running, left = self.policy.running, []
        for r in self.requeued:
            if _position(running, r) >= 0:
                r.resume()
            elif r.status == WAITING:  # not aborted meanwhile
                left.append(r)
        self.requeued = left

    def update(self, plan: Plan, tokens: list[int], start: float, end: float) -> list[Request]:
        """Apply a step that ran from start to end: each request's progress, its token (the stop rule), its
        status; then the KV the step held is noted (step_kv) and the finished leave their slots. Returns them."""
        done = self._advance(plan.works, tokens, start, end)
        self.step_kv = (self.pool.reserved_bytes(), self.kv_used_tokens * self.pool.bytes_per_token,
                        self.pool.step_fields(self.policy.running, plan.works, self.preempted_once))
        for r in done:
            self.policy.finished(r)
        if done:  # a request may have left its slot (static: the whole batch at its last finisher)
            self.recount()
        return done

    def abort(self, r: Request, now: float) -> None:
        """Stop r at `now`; its slot and KV are free for the next step."""
        r.abort(now)
        self.policy.finished(r)
        self.recount()

    def recount(self) -> None:
        """Re-sum the K/V the slot holders keep (Request.context_len over the running), and those held outside the
        batch (held_outside: a deployment's prompts waiting to be sent, transfers on their way)."""
        self.kv_used_tokens = sum(r.context_len for r in self.policy.running) + self.held_outside

    def hold(self, tokens: int) -> None:
        """K/V positions held outside the batch grow by `tokens` (negative: they shrink); counted as used."""
        self.held_outside += tokens
        self.recount()

    def reserve(self, r: Request) -> None:
        """Take a slot and the K/V of r's prefill and next position now, outside the batch (r is on its way with
        its K/V: enter)."""
        r.slot = self.pool.claim()
        if not self.pool.allocate(r, r.prefill_len + 1):
            raise RuntimeError(f"no KV to reserve for {r.id}")  # words: ok (a bug: room is asked for first)

    def _advance(self, works, tokens: list[int], start: float, now: float) -> list[Request]:
        """Each work's request one step on; those now done, in order. Also grows kv_used_tokens by the K/V this
        step stored (a tally, not a sum over every slot of every step)."""
        it = iter(tokens)
        done = []
        grown = 0
        dry = self.dry_run  # a local: the loop runs for every slot of every step
        for w in works:
            r = w.request
            phase = w.phase
            if phase == "wasted":  # the commonest work of a static batch: a done request, already admitted
                r.decode_computed_tokens += 1
                continue
            if r.admitted_s is None:  # admitted = first computed
                r.admit(start)
            if phase == "prefill":
                r.num_prefilled += w.tokens
                r.prefill_computed_tokens += w.tokens + w.padding
                grown += w.tokens  # its K/V stored; the first token it samples adds none (context_len)
                if r.num_prefilled < r.prefill_len:
                    continue
                if r.prefill_len != r.prompt_len:  # a recompute after a preemption is done: decoding as before
                    r.num_prefilled = r.prefill_len = r.prompt_len
            else:
                r.decode_computed_tokens += 1
                grown += 1  # the K/V of the token it fed
            out = r.output
            if dry:  # no token: the length alone ends it (known_output_len inlined: a hint, else max_new_tokens,
                tok, hint = -1, r.output_len_hint  # which check_requests made sure of)
                ended = len(out) + 1 >= (r.max_new_tokens if hint is None else hint)
            else:
                tok = next(it)
                ended = len(out) + 1 >= r.max_new_tokens or (tok == EOS and not r.ignore_eos)
            out.append(tok)
            r.token_times.append(now)
            if ended:  # the stop rule: its length, or EOS unless ignored
                r.finish(now, stop_reason(r, tok, dry))
                done.append(r)
        self.kv_used_tokens += grown
        return done


def stop_reason(r: Request, token: int, dry: bool) -> str:
    """Why a request that stopped at `token` stopped: "eos" (its EOS, not ignored), else "length". A dry run has
    no tokens: a replay that stopped short of max_new_tokens stopped at EOS."""
    eos = token == EOS if not dry else r.output_len < r.max_new_tokens
    return "eos" if eos and not r.ignore_eos else "length"
