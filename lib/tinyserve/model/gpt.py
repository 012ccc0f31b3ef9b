"""TinyGPT: the GPT-2 architecture, small enough for a laptop CPU, with a forward over a ragged step.

A *ragged step* is what a batching engine hands the model each iteration: several sequences at once, each
contributing a range of new tokens (a whole prompt, a prefill chunk or one decode token) at its own positions,
reading and writing its own KV slab. The linear layers run once over all the step's tokens concatenated;
attention is done per sequence against that sequence's own cache (decodes are batched into one call).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..core.kv import kv_bytes_per_token
from ..core.config import GPTConfig  # noqa: F401  torch-free, so a dry run never imports torch
from ..errors import TinyserveError
from ..core.tokenizer import EOS
from ..threads import before_step, fit_torch_threads

fit_torch_threads()  # once per process, before the first forward: threads that fit the machine

CHECKPOINT_DIR = Path(__file__).parents[1] / "checkpoints"
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.mlp = MLP(cfg)


# Cost, in slot-keys, of one more attention call: splitting decodes into groups pays off when it skips
# reading more than this many (slot, key) pairs of the slabs. Measured on CPU (about 300 was best); on a GPU
# reading keys is cheap and every call costs kernel launches, so it splits only for big savings. A heuristic:
# exactness is unaffected.
GROUP_CALL_COST = 256
GROUP_CALL_COST_CUDA = 65536


@dataclass
class DecodeGroup:
    """Decodes in the slot range [lo, hi): one attention call over a view of their slabs, keys [0, T)."""

    lo: int
    hi: int
    rows: torch.Tensor  # rows of the step's decode tokens in this group
    offsets: torch.Tensor  # their slot - lo
    mask: torch.Tensor  # (hi - lo, 1, 1, T) bool, True = attend


@dataclass
class StepInput:
    """One ragged step, as index tensors the model can use without Python loops over tokens.

    Rows are the step's tokens concatenated. Decode rows (one token each, slot >= 0) attend to their slabs in a
    few batched calls, each over a range of neighbouring slots; each prefill segment attends on its own.
    A segment with slot -1 is padding: computed, attending only to itself, never stored.
    """

    input_ids: torch.Tensor  # (N,) long
    positions: torch.Tensor  # (N,) long
    write_rows: torch.Tensor  # rows whose K/V go into a slab
    write_slots: torch.Tensor
    write_pos: torch.Tensor
    decode_groups: list[DecodeGroup]
    prefills: list[tuple[int, int, int, int]]  # (row_start, n_tokens, slot, start_pos)
    logits_rows: torch.Tensor  # rows whose next-token logits are wanted


def group_decodes(dec: list[tuple[int, int, int]], call_cost: int | None = None) -> list[list[tuple[int, int, int]]]:
    """Split (row, slot, context) decodes, sorted by slot, into runs of neighbouring slots.

    One call over a slot range reads every slot's slab up to the longest context in the range, so a long
    sequence next to short ones makes them all pay; a new group costs one more call. Greedy, left to right.
    """
    call_cost = GROUP_CALL_COST if call_cost is None else call_cost
    groups: list[list[tuple[int, int, int]]] = []
    lo = hi = T = 0
    for d in dec:
        _, slot, ctx = d
        if groups and (slot + 1 - lo) * max(T, ctx) <= (hi - lo) * T + call_cost + ctx:
            groups[-1].append(d)
            hi, T = slot + 1, max(T, ctx)
        else:
            groups.append([d])
            lo, hi, T = slot, slot + 1, ctx
    return groups


def build_step(segments: list[tuple[int, int, list[int]]], sample: list[bool], device: torch.device) -> StepInput:
    """Turn [(slot, start_pos, token_ids)] into a StepInput; sample[i] asks for segment i's last logits."""
    ids: list[int] = []
    pos: list[int] = []
    wr_rows: list[int] = []
    wr_slots: list[int] = []
    wr_pos: list[int] = []
    dec: list[tuple[int, int, int]] = []  # (row, slot, context length)
    prefills: list[tuple[int, int, int, int]] = []
    logit_rows: list[int] = []
    for (slot, start, toks), want in zip(segments, sample):
        row, n = len(ids), len(toks)
        ids.extend(toks)
        pos.extend(range(start, start + n))
        if slot >= 0:
            wr_rows.extend(range(row, row + n))
            wr_slots.extend([slot] * n)
            wr_pos.extend(range(start, start + n))
        if n == 1 and slot >= 0:
            dec.append((row, slot, start + 1))
        else:
            prefills.append((row, n, slot, start))
        if want:
            logit_rows.append(row + n - 1)

    def t(x: list[int]) -> torch.Tensor:
        return torch.tensor(x, dtype=torch.long, device=device)

    groups = []
    cost = GROUP_CALL_COST_CUDA if torch.device(device).type == "cuda" else None
    for g in group_decodes(sorted(dec, key=lambda d: d[1]), cost):
        lo, hi = g[0][1], g[-1][1] + 1
        lens = [1] * (hi - lo)  # slots in the range that do not decode see one (ignored) key
        for _, slot, ctx in g:
            lens[slot - lo] = ctx
        mask = (torch.arange(max(lens), device=device)[None, :] < t(lens)[:, None])[:, None, None, :]
        groups.append(DecodeGroup(lo, hi, t([r for r, _, _ in g]), t([slot - lo for _, slot, _ in g]), mask))
    return StepInput(t(ids), t(pos), t(wr_rows), t(wr_slots), t(wr_pos), groups, prefills, t(logit_rows))


class KVCache:
    """One slab per slot: K and V for every layer, reserved at max_len positions (Ch. 7's layout)."""

    def __init__(self, cfg: GPTConfig, num_slots: int, max_len: int, dtype: torch.dtype, device: torch.device):
        shape = (cfg.n_layer, num_slots, cfg.n_head, max_len, cfg.head_dim)
        # zeros, not empty: masked-out keys are multiplied by 0, and 0 * NaN from stale memory would be NaN
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.num_slots, self.max_len = num_slots, max_len
        self.bytes_per_token = kv_bytes_per_token(cfg.n_layer, cfg.n_embd, self.k.element_size())

    @property
    def slab_bytes(self) -> int:
        """Bytes one slot reserves."""
        return self.bytes_per_token * self.max_len


class TinyGPT(nn.Module):
    """GPT-2: learned positions, pre-LayerNorm, GELU(tanh), tied input/output embeddings."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.apply(self._init)
        for b in self.h:  # GPT-2's scaled init of residual projections
            for p in (b.attn.c_proj.weight, b.mlp.c_proj.weight):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    @property
    def device(self) -> torch.device:
        return self.wte.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.wte.weight.dtype

    def num_params(self) -> int:
        """Parameter count (the output head is tied to wte, so counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Full-sequence forward (training, reference): (B, T) token ids -> (B, T, vocab) logits."""
        cfg = self.config
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            q, k, v = b.attn.c_attn(b.ln_1(x)).view(B, T, 3, cfg.n_head, cfg.head_dim).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + b.attn.c_proj(y.transpose(1, 2).reshape(B, T, cfg.n_embd))
            x = x + b.mlp(b.ln_2(x))
        return self.ln_f(x) @ self.wte.weight.T

    @torch.inference_mode()
    def forward_step(self, s: StepInput, kv: KVCache) -> torch.Tensor:
        """One ragged step: every linear layer runs once over all N tokens; returns logits of s.logits_rows."""
        cfg = self.config
        before_step()  # the thread governor: all threads alone, one beside a CPU-heavy neighbour (threads.py)
        N, H, hd, d = s.input_ids.numel(), cfg.n_head, cfg.head_dim, cfg.n_embd
        x = self.wte(s.input_ids) + self.wpe(s.positions)
        for layer, b in enumerate(self.h):
            q, k, v = b.attn.c_attn(b.ln_1(x)).view(N, 3, H, hd).unbind(1)  # each (N, H, hd)
            kc, vc = kv.k[layer], kv.v[layer]
            if s.write_rows.numel():
                kc[s.write_slots, :, s.write_pos] = k[s.write_rows]
                vc[s.write_slots, :, s.write_pos] = v[s.write_rows]
            y = torch.empty(N, H, hd, dtype=x.dtype, device=x.device)
            for g in s.decode_groups:
                # a view of the group's slabs, no copy: the cache is read in place
                T = g.mask.shape[-1]
                qd = q.new_zeros(g.hi - g.lo, H, 1, hd)
                qd[g.offsets, :, 0] = q[g.rows]
                yd = F.scaled_dot_product_attention(qd, kc[g.lo:g.hi, :, :T], vc[g.lo:g.hi, :, :T], attn_mask=g.mask)
                y[g.rows] = yd[g.offsets, :, 0]
            for row, n, slot, start in s.prefills:
                qs = q[row:row + n].transpose(0, 1).unsqueeze(0)  # (1, H, n, hd)
                if slot < 0:  # padding: attends to itself only, stored nowhere
                    ks = k[row:row + n].transpose(0, 1).unsqueeze(0)
                    vs = v[row:row + n].transpose(0, 1).unsqueeze(0)
                else:
                    ks, vs = kc[slot:slot + 1, :, :start + n], vc[slot:slot + 1, :, :start + n]
                if start == 0 or slot < 0:
                    ys = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
                else:
                    allowed = torch.arange(start + n, device=x.device)[None, :] <= (
                        torch.arange(n, device=x.device)[:, None] + start)
                    ys = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=allowed)
                y[row:row + n] = ys[0].transpose(0, 1)
            x = x + b.attn.c_proj(y.view(N, d))
            x = x + b.mlp(b.ln_2(x))
        return self.ln_f(x[s.logits_rows]) @ self.wte.weight.T

    @torch.inference_mode()
    def generate(self, prompt: list[int], max_new_tokens: int, stop_at_eos: bool = True, eos: int = EOS) -> list[int]:
        """Greedy continuation of one prompt through the KV cache (the 'running alone' path)."""
        total = len(prompt) + max_new_tokens
        check_length(len(prompt), max_new_tokens, self.config.n_positions)
        kv = KVCache(self.config, 1, total, self.dtype, self.device)
        out: list[int] = []
        seg = (0, 0, list(prompt))
        for _ in range(max_new_tokens):
            logits = self.forward_step(build_step([seg], [True], self.device), kv)
            tok = int(logits[0].argmax())
            out.append(tok)
            if stop_at_eos and tok == eos:
                break
            seg = (0, seg[1] + len(seg[2]), [tok])
        return out


def check_length(prompt_len: int, max_new_tokens: int, context: int) -> None:
    """Raise a clear error unless a prompt plus its output fits the context."""
    if prompt_len < 1:
        raise TinyserveError("prompt: empty (needs at least 1 token)")
    if max_new_tokens < 1:
        raise TinyserveError(f"max_new_tokens: must be >= 1, got {max_new_tokens}")
    if prompt_len + max_new_tokens > context:
        raise TinyserveError(
            f"prompt: {prompt_len} tokens + max_new_tokens {max_new_tokens} exceeds the context of {context}")


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' -> cuda when present, else cpu; 'cuda' without a GPU is an error."""
    if device not in ("auto", "cpu", "cuda"):
        raise TinyserveError(f"device: unknown {device!r} (choose auto, cpu or cuda)")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise TinyserveError("device: cuda requested but no CUDA GPU is available (use --device cpu)")
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """float32 | float64 | bfloat16 (bfloat16 on CUDA only)."""
    if dtype not in DTYPES:
        raise TinyserveError(f"dtype: unknown {dtype!r} (choose float32, float64 or bfloat16)")
    if dtype == "bfloat16" and device.type != "cuda":
        raise TinyserveError("dtype: bfloat16 is supported on cuda only (use float32 or float64 on cpu)")
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
            raise TinyserveError(f"checkpoint: missing {f} (retrain with `python -m tinyserve.train`)")
    try:
        cfg = GPTConfig(**json.loads(cfg_file.read_text()))
        state = load_file(str(weights))
        model = TinyGPT(cfg)
        model.load_state_dict(state)
    except (ValueError, TypeError, RuntimeError, OSError, SafetensorError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0][:200]
        raise TinyserveError(f"checkpoint: {path} is corrupt or does not match the model ({first})")
    return model.to(device=dev, dtype=dt).eval()


def save_model(model: TinyGPT, path: str | Path) -> None:
    """Write config.json + model.safetensors in float32 (the shipped format; the tied head is stored once, as wte)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(asdict(model.config), indent=2) + "\n")
    state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path / "model.safetensors"))
