"""The one place the engine's steps are executed: the KV tensors, the step's segments, one forward, greedy sampling;
and the model's weights, loaded here (load_model, save_model: safetensors + config.json, nothing is ever unpickled),
as nano-vllm's model runner loads them.

The engine, the calibration, the validation and the benchmark all run steps through a ModelRunner (nano-vllm's
model_runner): works -> segments -> StepInput (index tensors, gpt.py) -> TinyGPT.forward_step -> argmax.

It also copies a request's KV out of one runner and into another (export_kv / import_kv, through a KVBlob that
is neither slab nor paged): disaggregated serving (Chapter 12) runs a request's prefill on one instance and its
decode on another, so the prompt's K/V must travel between them, as vLLM's KV connectors move it over NVLink or
RDMA. The copy converts between the two layouts, so a slab prefill instance can feed a paged decode instance.

And it holds the thread governor (Governor), which execute() asks before every step: all of torch's threads while
the cores are ours, one while another process competes for them (tinyserve/threads.py says why and how many).
"""
from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from .. import threads
from ..core.config import GPTConfig, check_device, check_load_dtype
from ..core.request import Request, Work
from ..core.tokenizer import EOS
from ..errors import TinyserveError
from ..lang import t
from .gpt import KV, PagedKV, SlabKV, StepInput, TinyGPT


Segments = list[tuple[int, int, list[int]]]  # (slot, start position, token ids); slot -1 is padding
WINDOW_S = 0.025  # the governor looks at most this often
CONTENDED = 0.10  # run-queue wait share of the main thread that means another process holds our cores
RETRY_S = 1.0  # how long one thread is kept before all are tried again
_SCHEDSTAT = "/proc/thread-self/schedstat"


def step_segments(works: list[Work], token_ids: Callable[[int, Work], list[int]] | None = None
                  ) -> tuple[Segments, list[bool]]:
    """The (slot, start, ids) segments of a step's works and which of them sample a next token.

    By default the ids are the requests' own (a prefill's slice of the prompt, a decode's last output token) and
    a prefill samples when it ends its prompt; token_ids(i, w) gives synthetic ids instead (calibration), and
    then every work but a wasted one samples. A padded prefill adds a padding segment: really computed,
    attending only to itself, thrown away.
    """
    segments: Segments = []
    sample: list[bool] = []
    for i, w in enumerate(works):
        if token_ids is not None:
            segments.append((w.slot, w.start, token_ids(i, w)))
            sample.append(w.phase != "wasted")
        elif w.phase == "prefill":
            r = w.request
            segments.append((w.slot, w.start, r.prefill_ids(w.start, w.tokens)))
            sample.append(w.start + w.tokens == r.prefill_len)
        else:
            segments.append((w.slot, w.start, [w.request.output[-1]]))
            sample.append(w.phase == "decode")
        if w.padding:
            segments.append((-1, 0, [EOS] * w.padding))
            sample.append(False)
    return segments, sample


@dataclass
class KVBlob:
    """The K/V of positions [0, n) of one request, in neither layout: k, v (n_layer, heads, n, head_dim), a copy."""

    k: torch.Tensor
    v: torch.Tensor

    @property
    def positions(self) -> int:
        """Positions it holds (n)."""
        return self.k.shape[2]

    @property
    def nbytes(self) -> int:
        """Bytes a transfer moves: K and V of every layer and head at its positions."""
        return self.k.nbytes + self.v.nbytes


class ModelRunner:
    """A model and its K/V (a gpt.SlabKV or gpt.PagedKV: the layout's own indexing); executes steps."""

    def __init__(self, model: TinyGPT, kv: KV):
        self.model, self.device, self.kv = model, model.device, kv

    @classmethod
    def with_slabs(cls, model: TinyGPT, num_slots: int, max_len: int) -> ModelRunner:
        """A runner whose K/V are num_slots slabs of max_len positions."""
        return cls(model, SlabKV(model.config, num_slots, max_len, model.dtype, model.device))

    @classmethod
    def with_blocks(cls, model: TinyGPT, num_blocks: int, block_size: int) -> ModelRunner:
        """A runner whose K/V are a pool of num_blocks blocks of block_size positions."""
        return cls(model, PagedKV(model.config, num_blocks, block_size, model.dtype, model.device))

    def build(self, segments: Segments, sample: list[bool], tables: dict[int, list[int]] | None = None) -> StepInput:
        """The step's index tensors, as its K/V's layout builds them (tables: slot -> block ids, if it has any)."""
        return self.kv.build(segments, sample, tables)

    def forward(self, step: StepInput) -> list[int]:
        """One forward over the step's tokens; the greedy next token of every sampling segment, in order."""
        return self.model.forward_step(step, self.kv).argmax(-1).tolist()

    def execute(self, works: list[Work], token_ids: Callable[[int, Work], list[int]] | None = None) -> list[int]:
        """Run one step of works (step_segments, build, forward): the tokens they sample."""
        if _governor is not None:  # all threads alone, one beside a busy neighbour (a few ns unless a window ended)
            _governor.before_step()
        return self.forward(self.kv.build(*step_segments(works, token_ids), self.kv.tables(works)))

    def export_kv(self, request: Request, n: int) -> KVBlob:
        """A copy of the K/V of request's positions [0, n), read from its slot or through its block table."""
        return KVBlob(*self.kv.export(request, n))

    def import_kv(self, request: Request, blob: KVBlob) -> None:
        """Write blob into positions [0, n) of request's slot (slab) or of its block table's blocks (paged)."""
        cfg = self.model.config
        want, dtype = (cfg.n_layer, cfg.n_head, blob.positions, cfg.head_dim), self.model.dtype
        for x in (blob.k, blob.v):
            if tuple(x.shape) != want or x.dtype != dtype:  # a blob from another model, or converted on the way
                raise RuntimeError(f"KV {tuple(x.shape)} {x.dtype} is not {want} {dtype}")  # words: ok (a bug)
        self.kv.write(request, blob.k.to(self.device), blob.v.to(self.device))

    @staticmethod
    def warm_up(model: TinyGPT) -> None:
        """An unmeasured step (two prefills, then two decodes) on scratch KV: the first forward in a fresh process
        pays allocations and kernel choices (measured ~100x a warm step), not a step's cost."""
        runner = ModelRunner.with_slabs(model, 2, 16)
        for segments in ([(0, 0, [EOS] * 8), (1, 0, [EOS] * 4)], [(0, 8, [EOS]), (1, 4, [EOS])]):
            runner.forward(runner.build(segments, [True, True]))


def generate(model: TinyGPT, prompt: list[int], max_new_tokens: int, stop_at_eos: bool = True,
             eos: int = EOS) -> list[int]:
    """Greedy continuation of one prompt running alone: TinyGPT.generate, under its old name here."""
    return model.generate(prompt, max_new_tokens, stop_at_eos, eos)


# ---- the weights: loading and saving (safetensors + config.json), device and dtype ----------------------------
CHECKPOINT_DIR = Path(__file__).parents[1] / "checkpoints"
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' -> cuda when present, else cpu; 'cuda' without a GPU is an error."""
    check_device(device)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise TinyserveError(t("engine.device.no_cuda"))
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """float32 | float64 | bfloat16 (bfloat16 on CUDA only)."""
    check_load_dtype(dtype)
    if dtype == "bfloat16" and device.type != "cuda":
        raise TinyserveError(t("engine.dtype.bfloat16"))
    return DTYPES[dtype]


def load_model(path: str | Path | None = None, device: str = "auto", dtype: str = "float32") -> TinyGPT:
    """Load a checkpoint directory (config.json + model.safetensors); the shipped one by default."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path) if path is not None else CHECKPOINT_DIR
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    cfg_file, weights = path / "config.json", path / "model.safetensors"
    for f in (cfg_file, weights):
        if not f.is_file():
            raise TinyserveError(t("engine.checkpoint.missing", file=f))
    try:
        cfg = GPTConfig(**json.loads(cfg_file.read_text()))
        state = load_file(str(weights))
        model = TinyGPT(cfg)
        model.load_state_dict(state)
    except (ValueError, TypeError, RuntimeError, OSError, SafetensorError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0][:200]
        raise TinyserveError(t("engine.checkpoint.corrupt", path=path, first=first))
    return model.to(device=dev, dtype=dt).eval()


def save_model(model: TinyGPT, path: str | Path) -> None:
    """Write config.json + model.safetensors in float32 (the shipped format; the tied head is stored once, as wte)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(asdict(model.config), indent=2) + "\n")
    state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path / "model.safetensors"))


# ---- the thread governor (threads.py: why, and the threads the machine allows) ---------------------------------
def _run_queue_wait_ns() -> int | None:
    """Nanoseconds the calling thread has spent runnable but waiting for a CPU; None where Linux does not say."""
    try:
        with open(_SCHEDSTAT) as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _others_running() -> int:
    """Runnable threads on the machine besides the caller (/proc/loadavg's 4th field; 0 where unreadable)."""
    try:
        with open("/proc/loadavg") as f:
            return max(0, int(f.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        return 0


class Governor:
    """All threads while the cores are ours; one while another process competes for them (see the module doc).

    With several threads it watches the main thread's run-queue wait; with one, it counts the other runnable
    threads (its own workers sleep then) and takes as many threads as there are free CPUs, at most `threads`.
    """

    def __init__(self, threads: int, cpus: int, set_threads, get_threads, clock=time.perf_counter,
                 wait_ns=None, others=None):
        self.threads, self.cpus, self.current = threads, cpus, threads
        self._set, self._get, self._clock = set_threads, get_threads, clock
        self._wait_ns = wait_ns or (lambda: _run_queue_wait_ns())  # looked up when called: tests stub them
        self._others = others or (lambda: _others_running())
        self.active = threads > 1 and self._wait_ns() is not None
        self.hold_until, self.strikes = 0.0, 0
        self._mark()
        if self.active and self._free() < threads:  # already busy when the model loads: start with one
            self._use(1)

    def _free(self) -> int:
        return min(self.threads, max(1, self.cpus - self._others()))

    def _mark(self) -> None:
        self.t0, self.w0 = self._clock(), self._wait_ns()
        self.next = self.t0 + WINDOW_S

    def _use(self, n: int) -> None:
        self._set(n)
        self.current, self.strikes = n, 0
        self._mark()

    def before_step(self) -> None:
        """Called before each step; does its work at most once per WINDOW_S."""
        if not self.active or self._clock() < self.next:
            return
        if self._get() != self.current:  # the user called torch.set_num_threads: theirs from now on
            self.active = False
            return
        now, w = self._clock(), self._wait_ns()
        if w is None:
            self.active = False
            return
        dt = now - self.t0
        if self.current == 1:
            n = self._free() if now >= self.hold_until else 1
            if n > 1:
                self._use(n)
            else:
                self._mark()
        elif dt <= 10 * WINDOW_S and (w - self.w0) / 1e9 > CONTENDED * dt:  # a longer gap: the run was paused
            self.strikes += 1
            if self.strikes >= 2:  # two windows in a row: a neighbour, not a passing shell command
                self._use(1)
                self.hold_until = now + RETRY_S
            else:
                self._mark()
        else:
            self.strikes = 0
            self._mark()


# the process's governor (torch's threads are the process's): the choice fit_torch_threads made when the model
# package loaded, before this module (threads.governed)
_governor = Governor(*threads.governed, torch.set_num_threads, torch.get_num_threads) if threads.governed else None


def configured_threads() -> int:
    """The intra-op threads this process runs with: the governor's full count (it may use one for a while)."""
    return _governor.threads if _governor is not None and _governor.active else torch.get_num_threads()


@contextlib.contextmanager
def fixed() -> Iterator[int]:
    """Hold the thread count still (calibration times steps at one setting): yields the count in use."""
    g = _governor if _governor is not None and _governor.active else None
    if g is not None:
        g.active = False
        if g.current != g.threads:
            torch.set_num_threads(g.threads)
    try:
        yield torch.get_num_threads()
    finally:
        if g is not None:
            g.current, g.active = torch.get_num_threads(), True
            g._mark()
