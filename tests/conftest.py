"""Shared fixtures: the devices to run on, a seeded random TinyGPT and the shipped checkpoint.

Device- and model-parametrized tests are always *collected* for every variant; a variant this machine cannot
run (CUDA without a GPU, the checkpoint before it is trained) shows up as a skip with its reason, never as a
silently missing test.
"""
from __future__ import annotations

import copy
import signal
from collections.abc import Callable

import pytest

import tinyserve  # noqa: F401
import torch  # noqa: E402

from tinyserve.model import CHECKPOINT_DIR, GPTConfig, TinyGPT, load_model
from tinyserve.requests import Request
from tinyserve.tokenizer import EOS

CUDA = torch.cuda.is_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="no CUDA GPU on this machine")),
]
HAS_CHECKPOINT = (CHECKPOINT_DIR / "config.json").is_file() and (CHECKPOINT_DIR / "model.safetensors").is_file()
MODEL_KINDS = [
    "random",
    pytest.param("checkpoint", marks=pytest.mark.skipif(
        not HAS_CHECKPOINT, reason=f"no shipped checkpoint in {CHECKPOINT_DIR} (run python -m tinyserve.train)")),
]
# Tolerances on logits against a reference computed another way (full recompute, transformers).
ATOL = {torch.float64: 1e-9, torch.float32: 1e-4}
DTYPES = [torch.float64, torch.float32]


def make_random_model(n_positions: int = 512, seed: int = 0, **shape: int) -> TinyGPT:
    """A float64 CPU TinyGPT whose every parameter is random, including LayerNorm gains and all biases.

    GPT-2's own init zeroes the biases and sets LayerNorm to (1, 0); a converter that swapped ln_1/ln_2 or
    dropped a bias would then still agree, so the parity tests could not fail. Scales are chosen so attention
    is far from uniform and logits spread over a few units, as in a trained model.
    """
    g = torch.Generator().manual_seed(seed)
    model = TinyGPT(GPTConfig(n_positions=n_positions, **shape)).to(torch.float64)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.copy_(1.0 + 0.2 * r)
            elif name in ("wte.weight", "wpe.weight"):
                p.copy_(0.2 * r)
            elif name.endswith(".weight"):
                p.copy_(0.1 * r)
            else:  # biases
                p.copy_(0.05 * r)
    return model.eval()


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    """Each device this suite targets (cuda is skipped, with a reason, where there is no GPU)."""
    return torch.device(request.param)


@pytest.fixture(params=MODEL_KINDS)
def model_kind(request: pytest.FixtureRequest) -> str:
    """'random' always; 'checkpoint' when the shipped weights exist."""
    return request.param


_BASE: dict[str, TinyGPT] = {}
_COPIES: dict[tuple[str, str, torch.dtype], TinyGPT] = {}


def _base_model(kind: str) -> TinyGPT:
    """The float64 CPU original of a model kind, built once per test session."""
    if kind not in _BASE:
        if kind == "random":
            _BASE[kind] = make_random_model()
        elif kind == "checkpoint":
            if not HAS_CHECKPOINT:
                pytest.skip(f"no shipped checkpoint in {CHECKPOINT_DIR}")
            _BASE[kind] = load_model(device="cpu", dtype="float64")  # float32 weights upcast exactly
        else:
            raise ValueError(f"unknown model kind {kind!r}")
    return _BASE[kind]


def model_copy(kind: str, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float64) -> TinyGPT:
    """A cached copy of a model kind on device in dtype; callers must not modify it."""
    key = (kind, str(torch.device(device)), dtype)
    if key not in _COPIES:
        _COPIES[key] = copy.deepcopy(_base_model(kind)).to(device=device, dtype=dtype).eval()
    return _COPIES[key]


@pytest.fixture(scope="session")
def random_model() -> TinyGPT:
    """The seeded random model, float64 on CPU (n_positions 512: room for a 300-token prompt)."""
    return _base_model("random")


@pytest.fixture(scope="session")
def checkpoint_model() -> TinyGPT:
    """The shipped checkpoint in float64 on CPU (skipped, with a reason, before it is trained)."""
    return _base_model("checkpoint")


@pytest.fixture(scope="session")
def get_model() -> Callable[..., TinyGPT]:
    """get_model(kind, device="cpu", dtype=torch.float64) -> a cached model copy; do not modify it."""
    return model_copy


@pytest.fixture(scope="module")
def torch_one_thread():
    """Run a module's tiny tensor ops on one intra-op thread, then restore the setting.

    The parity tests push a few hundred tokens through a 128-wide model: threads gain nothing there, and on a
    busy 2-core machine OpenMP's spinning made them 10-50x slower (measured: 6 s on one thread vs 45-60 s on
    two while other jobs ran). Results do not depend on it: every comparison has a tolerance or is float64.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def greedy_alone(model: TinyGPT, r: Request) -> list[int]:
    """The reference for batching tests: full recompute of one request, no KV cache, no batch."""
    ids, out = list(r.prompt), []
    with torch.no_grad():
        for _ in range(r.max_new_tokens):
            tok = int(model(torch.tensor([ids], device=model.device))[0, -1].argmax())
            out.append(tok)
            if tok == EOS and not r.ignore_eos:
                break
            ids.append(tok)
    return out


def default_sigint() -> None:
    """Let the child take Ctrl-C even when this run was started with SIGINT ignored (a background CI job):
    Python installs its KeyboardInterrupt handler only if SIGINT is at its default when it starts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
