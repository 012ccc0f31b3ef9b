"""Train the shipped TinyGPT on Python's own standard library (PSF licence); no downloads.

    python -m tinyserve.tools.train [--minutes 20] [--steps N] [--out DIR]

Each document is one top-level function, one method, one class header or one module docstring, wrapped in
BOS ... EOS, so the model learns to end its own outputs; their lengths are long-tailed like real traffic.
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import math
import os
import random
import sysconfig
import textwrap
import time
from pathlib import Path

import torch

from ..core.config import GPTConfig
from ..model.gpt import TinyGPT
from ..model.runner import CHECKPOINT_DIR, save_model
from ..core.tokenizer import EOS, decode, encode

SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "__pycache__", "turtledemo"}
MAX_DOC_BYTES = 3000


def _segment(lines: list[str], node: ast.AST, padded: bool) -> str:
    """ast.get_source_segment over lines split once (calling it per node re-splits the file: quadratic)."""
    first, last = node.lineno - 1, node.end_lineno - 1
    head = lines[first].encode()
    if first == last:
        return head[node.col_offset:node.end_col_offset].decode()
    pad = "".join(c if c in "\f\t" else " " for c in head[:node.col_offset].decode()) if padded else ""
    return (pad + head[node.col_offset:].decode() + "".join(lines[first + 1:last])
            + lines[last].encode()[:node.end_col_offset].decode())


def _segments(tree: ast.Module, src: str) -> list[str]:
    docs = []
    lines = list(io.StringIO(src, newline=""))  # line breaks as ast counts them (a form feed is not one)
    plain = src.splitlines()
    mod_doc = ast.get_docstring(tree, clean=False)
    if mod_doc:
        docs.append('"""' + mod_doc.strip() + '\n"""\n')
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            docs.append(_segment(lines, node, padded=False))
        elif isinstance(node, ast.ClassDef):
            methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            first = methods[0].lineno - 1 - len(methods[0].decorator_list) if methods else node.end_lineno
            docs.append("\n".join(plain[node.lineno - 1 - len(node.decorator_list):first]))
            for m in methods:
                docs.append(textwrap.dedent(_segment(lines, m, padded=True)))
    return docs


def stdlib_files() -> list[Path]:
    """The standard library's .py files, in a fixed order, without tests, IDLE and installed packages."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)  # prune: site-packages can be huge
        files += [Path(dirpath) / f for f in filenames if f.endswith(".py")]
    return sorted(files)


def corpus_documents(max_files: int | None = None) -> list[str]:
    """All documents of this Python's standard library (or of its first max_files files), in a fixed order."""
    docs: list[str] = []
    for f in stdlib_files()[:max_files]:
        try:
            src = f.read_text(encoding="utf-8")
            tree = ast.parse(src)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for d in _segments(tree, src):
            d = d.strip("\n")
            if 20 <= len(d.encode()) <= MAX_DOC_BYTES:
                docs.append(d + "\n")
    return docs


def token_stream(docs: list[str], seed: int) -> torch.Tensor:
    """BOS doc EOS BOS doc EOS ... in a seeded shuffle."""
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    ids: list[int] = []
    for i in order:
        ids.extend(encode(docs[i]))
        ids.append(EOS)
    return torch.tensor(ids, dtype=torch.long)


@torch.no_grad()
def _val_loss(model: TinyGPT, val_data: torch.Tensor, batch: int, block: int) -> float:
    """Mean loss of 10 seeded validation batches (the same batches every call)."""
    model.eval()
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(10):
        ix = torch.randint(len(val_data) - block - 1, (batch,), generator=g)
        x = torch.stack([val_data[i:i + block + 1] for i in ix])
        losses.append(torch.nn.functional.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten()).item())
    model.train()
    return sum(losses) / len(losses)


def train(minutes: float, steps: int, out: Path, batch: int = 32, block: int = 256, seed: int = 0,
          lr: float = 3e-3, log_every: int = 50, max_files: int | None = None, sample_tokens: int = 120) -> dict:
    """Train until `steps` or `minutes` (whichever first); save the checkpoint and its numbers; return stats."""
    torch.manual_seed(seed)
    docs = corpus_documents(max_files)
    data = token_stream(docs, seed)
    n_val = len(data) // 50
    train_data, val_data = data[n_val:], data[:n_val]
    model = TinyGPT(GPTConfig())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(seed)

    def get_batch(src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(src) - block - 1, (batch,), generator=gen)
        x = torch.stack([src[i:i + block + 1] for i in ix])
        return x[:, :-1], x[:, 1:]

    t0 = time.time()
    deadline = t0 + minutes * 60
    warmup, step, loss_avg, first_loss = min(100, max(1, steps // 10)), 0, None, None
    model.train()
    while step < steps and time.time() < deadline:
        # cosine schedule over the step budget, or over the time budget when that is the binding one
        frac = max(step / steps, (time.time() - t0) / (minutes * 60))
        for g in opt.param_groups:
            g["lr"] = lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        x, y = get_batch(train_data)
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        first_loss = loss.item() if first_loss is None else first_loss
        loss_avg = loss.item() if loss_avg is None else 0.95 * loss_avg + 0.05 * loss.item()
        step += 1
        if step % log_every == 0:
            print(f"step {step} loss {loss_avg:.3f} ({time.time() - t0:.0f}s)", flush=True)
    elapsed = time.time() - t0
    stats = {"steps": step, "first_loss": round(first_loss or float("nan"), 4), "train_loss": round(loss_avg or float("nan"), 4), "val_loss": round(_val_loss(model, val_data, batch, block), 4),
             "train_seconds": round(elapsed, 1), "tokens_seen": step * batch * block, "batch": batch, "block": block,
             "corpus_documents": len(docs), "corpus_tokens": len(data), "seed": seed, "lr": lr,
             "params": model.num_params(), "torch": torch.__version__,
             "python_stdlib": sysconfig.get_paths()["stdlib"].rsplit("/", 1)[-1]}
    model.eval()
    save_model(model, out)
    samples = {p: decode(model.generate(encode(p), sample_tokens, eos=EOS)) for p in ("def ", "class ", "import ", '"""')}
    stats["samples"] = samples
    (out / "training.json").write_text(json.dumps(stats, indent=2) + "\n")
    return stats


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tinyserve.tools.train", description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=20.0, help="wall-clock budget (default 20)")
    ap.add_argument("--steps", type=int, default=3000, help="step budget (default 3000)")
    ap.add_argument("--out", type=Path, default=CHECKPOINT_DIR, help="checkpoint directory")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    stats = train(a.minutes, a.steps, a.out, seed=a.seed)
    print(json.dumps({k: v for k, v in stats.items() if k != "samples"}, indent=2))
    for p, s in stats["samples"].items():
        print(f"--- {p!r}\n{p}{s}")


if __name__ == "__main__":
    main()
