"""What tests share besides fixtures: the devices and model kinds, a seeded random TinyGPT, cached model copies,
the running-alone reference. Imported as `from helpers import ...` (pyproject's pythonpath puts tests/ first)."""
from __future__ import annotations

import copy
import signal

import pytest
import torch

from tinyserve.core.config import GPTConfig
from tinyserve.core.request import Request
from tinyserve.core.tokenizer import EOS
from tinyserve.model.gpt import TinyGPT
from tinyserve.model.runner import CHECKPOINT_DIR, load_model

CUDA = torch.cuda.is_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="no CUDA GPU on this machine")),
]
HAS_CHECKPOINT = (CHECKPOINT_DIR / "config.json").is_file() and (CHECKPOINT_DIR / "model.safetensors").is_file()
MODEL_KINDS = [
    "random",
    pytest.param("checkpoint", marks=pytest.mark.skipif(
        not HAS_CHECKPOINT, reason=f"no shipped checkpoint in {CHECKPOINT_DIR} (run python -m tinyserve.tools.train)")),
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
