"""Loading and saving the tiny GPT: safetensors weights + config.json (nothing is ever unpickled), device and dtype."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import torch

from ..core.config import GPTConfig, check_device, check_load_dtype
from ..errors import TinyserveError
from ..lang import t
from .gpt import TinyGPT

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
