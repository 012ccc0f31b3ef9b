"""Export TinyGPT to transformers' GPT2LMHeadModel and load such a folder back (transformers is optional).

TinyGPT *is* GPT-2 (learned positions, pre-LayerNorm, GELU(tanh) = HF's "gelu_new", tied embeddings), so the
mapping is a renaming plus one transpose: HF's `Conv1D` stores its weight as (in, out), our `nn.Linear` as
(out, in). Weights travel as safetensors only; nothing here unpickles a file.

    export_hf(model, "out/")                       # AutoModelForCausalLM / AutoTokenizer / `transformers serve` load it
    hf = to_hf_model(model)                        # the same network in memory, same dtype and device
    model = load_hf("out/")                        # a GPT-2 safetensors folder with our byte tokenizer -> TinyGPT

The tokenizer travels too (tokenizer.json, built with the `tokenizers` library): without it AutoTokenizer
falls back to an empty GPT2Tokenizer that encodes "hello" as [], and a server would feed the model garbage.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..errors import TinyserveError
from ..lang import t
from ..core.config import GPTConfig
from ..model.gpt import TinyGPT
from ..model.runner import resolve_device, resolve_dtype
from ..core.tokenizer import BOS, EOS, VOCAB_SIZE, encode

if TYPE_CHECKING:  # only for type hints: importing tinyserve must not need transformers
    from transformers import GPT2Config, GPT2LMHeadModel

_CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")  # HF Conv1D: weight is (in, out)
# Buffers that older GPT-2 checkpoints carry (the causal mask); they hold no learned weights.
_IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")


BOS_TEXT, EOS_TEXT = "<|bos|>", "<|eos|>"
# Texts a saved tokenizer must encode exactly as tinyserve.core.tokenizer does (incl. our special tokens' spelling).
_TOKENIZER_PROBES = ("hello", "連續批次", "🚀 ok", "", " \t\n\r\x00\x7f", BOS_TEXT + EOS_TEXT)


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte -> printable character map, which the `tokenizers` ByteLevel pre-tokenizer applies."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    moved = [b for b in range(256) if b not in keep]  # whitespace and control bytes go to U+0100 onwards
    return {**{b: chr(b) for b in keep}, **{b: chr(256 + i) for i, b in enumerate(moved)}}


def byte_tokenizer() -> Any:
    """tinyserve.core.tokenizer as a `tokenizers.Tokenizer`: id i is byte i, BOS 256 prepended, EOS 257."""
    try:
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    except ImportError as e:
        raise TinyserveError(t("cli.hf.install")) from e
    chars = _byte_chars()
    # A BPE with no merges leaves every byte a token of its own: exactly our byte-level ids.
    tok = Tokenizer(models.BPE(vocab={chars[b]: b for b in range(256)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)  # bytes, no word split
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(BOS_TEXT, special=True), AddedToken(EOS_TEXT, special=True)])
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS_TEXT} $A", pair=f"{BOS_TEXT} $A $B", special_tokens=[(BOS_TEXT, BOS)])
    if (tok.token_to_id(BOS_TEXT), tok.token_to_id(EOS_TEXT)) != (BOS, EOS):
        raise TinyserveError("hf: special token ids do not match tinyserve.core.tokenizer")  # words: ok (a bug)
    return tok


def save_tokenizer(out_dir: str | Path, n_positions: int) -> None:
    """Write tokenizer.json + tokenizer_config.json, which AutoTokenizer (transformers 4 and 5) loads."""
    tf = _transformers()
    fast = tf.PreTrainedTokenizerFast(
        tokenizer_object=byte_tokenizer(), bos_token=BOS_TEXT, eos_token=EOS_TEXT, pad_token=EOS_TEXT,
        model_max_length=n_positions, clean_up_tokenization_spaces=False,
        split_special_tokens=True)  # the text "<|eos|>" is 7 bytes to us, so it must be to transformers too
    fast.save_pretrained(out_dir)
    cfg_file = Path(out_dir) / "tokenizer_config.json"
    cfg = json.loads(cfg_file.read_text())
    # transformers 5 writes its own class name, which transformers 4 (and so vLLM, TGI) does not know.
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_file.write_text(json.dumps(cfg, indent=2) + "\n")


def check_tokenizer(path: str | Path) -> None:
    """Refuse a folder whose tokenizer is missing or does not encode text as tinyserve.core.tokenizer does."""
    path = Path(path)
    file = path / "tokenizer.json"
    hint = t("cli.hf.tokenizer_hint")
    if not file.is_file():
        raise TinyserveError(t("cli.hf.no_tokenizer", path=path, hint=hint))
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
        vocab = raw["model"]["vocab"]
        added = {t["id"]: t["content"] for t in raw.get("added_tokens", [])}
    except (ValueError, OSError, KeyError, TypeError) as e:
        raise TinyserveError(t("cli.hf.not_tokenizer", file=file, error=e)) from e
    chars = _byte_chars()
    if not isinstance(vocab, dict) or len(vocab) + len(added) != VOCAB_SIZE or any(
            vocab.get(chars[b]) != b for b in range(256)) or added != {BOS: BOS_TEXT, EOS: EOS_TEXT}:
        raise TinyserveError(t("cli.hf.not_bytes", file=file, hint=hint))
    try:
        from tokenizers import Tokenizer
    except ImportError:  # the structural check above is all we can do without the library
        return
    tok = Tokenizer.from_file(str(file))
    try:  # transformers applies this flag from tokenizer_config.json; without it "<|eos|>" in text becomes 257
        cfg = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
        tok.encode_special_tokens = bool(cfg.get("split_special_tokens", False))
    except (ValueError, OSError, AttributeError):
        pass  # no usable config: the probes below say whether the tokenizer alone encodes as ours
    for text in _TOKENIZER_PROBES:
        if tok.encode(text).ids != encode(text):
            raise TinyserveError(t("cli.hf.encodes", file=file, text=text, ids=tok.encode(text).ids[:12], hint=hint))


def _is_conv1d_weight(name: str) -> bool:
    """True for a (TinyGPT-named) weight that HF keeps in a Conv1D, i.e. transposed."""
    return name.startswith("h.") and name.endswith(".weight") and any(f".{c}." in name for c in _CONV1D)


def _transformers() -> Any:
    """Import transformers lazily so the engine, CLI and notebooks run without it."""
    try:
        import transformers
    except ImportError as e:
        raise TinyserveError(t("cli.hf.install")) from e
    return transformers


def hf_config(cfg: GPTConfig) -> "GPT2Config":
    """The GPT2Config describing a TinyGPT of shape cfg (dropout off: this is an inference export)."""
    tf = _transformers()
    return tf.GPT2Config(
        vocab_size=cfg.vocab_size,
        n_positions=cfg.n_positions,
        n_embd=cfg.n_embd,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        n_inner=None,  # None means 4 * n_embd, our MLP width
        activation_function="gelu_new",  # GELU with the tanh approximation, as in MLP.forward
        layer_norm_epsilon=cfg.layer_norm_eps,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        scale_attn_weights=True,
        scale_attn_by_inverse_layer_idx=False,
        reorder_and_upcast_attn=False,
        tie_word_embeddings=True,
        bos_token_id=BOS,
        eos_token_id=EOS,
    )


def to_hf_state_dict(model: TinyGPT) -> dict[str, torch.Tensor]:
    """Our parameters under GPT2LMHeadModel's names, Conv1D weights transposed to (in, out).

    The tied output head is not listed: HF ties lm_head.weight to transformer.wte.weight itself.
    """
    out: dict[str, torch.Tensor] = {}
    for name, t in model.state_dict().items():
        if _is_conv1d_weight(name):
            t = t.T
        # a copy, so the HF model never shares (and silently mutates) our parameters' storage
        out[f"transformer.{name}"] = t.detach().clone(memory_format=torch.contiguous_format)
    return out


def to_hf_model(model: TinyGPT) -> "GPT2LMHeadModel":
    """The same network as a transformers GPT2LMHeadModel, on model's device and dtype, in eval mode."""
    tf = _transformers()
    # Build on the meta device: no time spent on a random init that is overwritten right away.
    with torch.device("meta"):
        hf = tf.GPT2LMHeadModel(hf_config(model.config))
    state = to_hf_state_dict(model)
    # assign=True adopts our tensors' device and dtype instead of copying into meta placeholders.
    missing, unexpected = hf.load_state_dict(state, strict=False, assign=True)
    hf.tie_weights()  # re-point lm_head.weight at the newly assigned wte
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:  # a mapping bug, not a user error: say exactly which names disagree
        raise TinyserveError(f"hf: weight names do not match GPT-2 (missing {missing}, unexpected {unexpected})")  # words: ok (a bug)
    if hf.lm_head.weight.data_ptr() != hf.transformer.wte.weight.data_ptr():
        raise TinyserveError("hf: lm_head is not tied to wte after conversion")  # words: ok (a bug)
    # Every tensor must now live where our model does (a meta tensor left over would mean a missing weight).
    for name, tensor in list(hf.named_parameters()) + list(hf.named_buffers()):
        if tensor.device != model.device:
            raise TinyserveError(f"hf: {name} is on {tensor.device}, expected {model.device}")  # words: ok (a bug)
    hf.config.dtype = model.dtype  # recorded in config.json, so dtype="auto" loads what was written
    hf.generation_config.bos_token_id = BOS
    hf.generation_config.eos_token_id = EOS
    # GPT-2 has no pad token; padding with EOS is the usual convention and stops generate() warning.
    hf.generation_config.pad_token_id = EOS
    return hf.eval()


def export_hf(model: TinyGPT, out_dir: str | Path) -> Path:
    """Write a folder AutoModelForCausalLM, AutoTokenizer and `transformers serve` load: config.json,
    generation_config.json, model.safetensors (HF names, the model's own dtype: lossless) and the tokenizer."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise TinyserveError(t("cli.hf.not_dir", out=out))
    hf = to_hf_model(model)
    hf_logging = _transformers().utils.logging
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a one-file save needs no "Writing model shards" bar on stderr
    try:
        out.mkdir(parents=True, exist_ok=True)
        hf.save_pretrained(out)
        save_tokenizer(out, model.config.n_positions)
    except OSError as e:
        raise TinyserveError(t("cli.hf.cannot_write", out=out, error=e)) from e
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    return out


def serve_command(folder: str | Path, port: int, num_blocks: int = 256, max_batch_tokens: int = 2048,
                  host: str = "127.0.0.1") -> list[str]:
    """argv of `transformers serve` on an export, with continuous batching on CPU (flags: DESIGN.md).

    num_blocks sizes the paged KV cache (blocks of 32 tokens); unsized, it takes 60% of RAM (4.5 GB seen here).
    """
    import shutil
    import sys

    exe = Path(sys.executable).with_name("transformers")  # the console script of this environment
    cmd = [str(exe)] if exe.is_file() else [shutil.which("transformers") or "transformers"]
    return cmd + ["serve", str(folder), "--continuous-batching", "--device", "cpu", "--host", host, "--port",
                  str(port), "--cb-num-blocks", str(num_blocks), "--cb-max-batch-tokens", str(max_batch_tokens)]


def _check_hf_config(raw: dict[str, Any], path: Path) -> GPTConfig:
    """A GPTConfig from an HF GPT-2 config.json, refusing variants TinyGPT does not compute."""
    def bad(what: str) -> TinyserveError:
        return TinyserveError(t("cli.hf.not_plain", file=path / "config.json", what=what))

    if raw.get("model_type", "gpt2") != "gpt2":
        raise bad(t("cli.hf.model_type", value=raw.get("model_type")))
    act = raw.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh"):  # both are GELU(tanh), what MLP.forward computes
        raise bad(t("cli.hf.activation", value=act))
    for key, want in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                      ("add_cross_attention", False), ("tie_word_embeddings", True)):
        if raw.get(key, want) != want:
            raise bad(t("cli.hf.flag", field=key, value=raw[key]))
    try:
        n_embd = int(raw.get("n_embd", raw.get("hidden_size")))
        cfg = GPTConfig(
            vocab_size=int(raw["vocab_size"]),
            n_positions=int(raw.get("n_positions", raw.get("max_position_embeddings"))),
            n_layer=int(raw.get("n_layer", raw.get("num_hidden_layers"))),
            n_head=int(raw.get("n_head", raw.get("num_attention_heads"))),
            n_embd=n_embd,
            layer_norm_eps=float(raw.get("layer_norm_epsilon", 1e-5)),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise bad(t("cli.hf.shape_field", error=e)) from e
    if raw.get("n_inner") not in (None, 4 * n_embd):
        raise bad(t("cli.hf.n_inner", value=raw["n_inner"]))
    if cfg.n_embd % cfg.n_head:
        raise bad(t("engine.model.heads", n_embd=cfg.n_embd, n_head=cfg.n_head))
    return cfg


def _safetensors_files(path: Path) -> list[Path]:
    """The weight files of an HF folder: model.safetensors, or the shards its index names."""
    single, index = path / "model.safetensors", path / "model.safetensors.index.json"
    if single.is_file():
        return [single]
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise TinyserveError(t("cli.hf.corrupt", file=index, error=e)) from e
        return [path / s for s in shards]
    if any((path / n).exists() for n in ("pytorch_model.bin", "model.bin", "tf_model.h5")):
        raise TinyserveError(t("cli.hf.pickled", path=path))
    raise TinyserveError(t("cli.hf.no_safetensors", path=path))


def _read_hf_config(path: Path) -> GPTConfig:
    """config.json of an HF GPT-2 folder, checked."""
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise TinyserveError(t("cli.hf.missing", file=cfg_file))
    try:
        raw = json.loads(cfg_file.read_text())
    except (ValueError, OSError) as e:
        raise TinyserveError(t("cli.hf.bad_json", file=cfg_file, error=e)) from e
    if not isinstance(raw, dict):
        raise TinyserveError(t("cli.hf.not_object", file=cfg_file))
    return _check_hf_config(raw, path)


def _our_weights(path: Path) -> dict[str, torch.Tensor]:
    """The folder's safetensors under TinyGPT's names (Conv1D weights transposed); an untied head is refused."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    state: dict[str, torch.Tensor] = {}
    for f in _safetensors_files(path):
        try:
            state.update(load_file(str(f)))
        except (SafetensorError, OSError, ValueError) as e:
            raise TinyserveError(t("cli.hf.corrupt", file=f, error=str(e).strip()[:200] or type(e).__name__)) from e
    ours: dict[str, torch.Tensor] = {}
    head = None
    for name, tensor in state.items():
        if name.endswith(_IGNORED_SUFFIXES):
            continue
        if name == "lm_head.weight":
            head = tensor
            continue
        # GPT2LMHeadModel saves "transformer.h.0...", a bare GPT2Model saves "h.0..."
        key = name.removeprefix("transformer.")
        if _is_conv1d_weight(key):
            tensor = tensor.T
        ours[key] = tensor.contiguous()
    # Our head is tied to wte; an untied head we would silently drop must be refused instead.
    if head is not None and "wte.weight" in ours and not torch.equal(head, ours["wte.weight"]):
        raise TinyserveError(t("cli.hf.untied", path=path))
    return ours


def load_hf(path: str | Path, device: str = "auto", dtype: str | None = None,
            require_tokenizer: bool = True) -> TinyGPT:
    """Read an HF GPT-2 folder (config.json + safetensors + our byte tokenizer) into a TinyGPT, in eval mode.

    A folder without tokenizer.json, or with another tokenizer (GPT-2's own BPE), is refused: its ids mean
    other text than tinyserve.core.tokenizer's. require_tokenizer=False loads bare weights on purpose.
    dtype None keeps the dtype the weights were stored in when tinyserve runs it on that device (float32,
    float64, bfloat16 on cuda), else float32; "float32" etc. converts. Does not need transformers.
    """
    path = Path(path)
    cfg = _read_hf_config(path)
    if require_tokenizer:
        check_tokenizer(path)
    dev = resolve_device(device)
    ours = _our_weights(path)
    with torch.device("meta"):  # shapes only: load_state_dict(assign=True) supplies the real tensors
        model = TinyGPT(cfg)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(ours))
    unexpected = sorted(set(ours) - set(expected))
    if missing or unexpected:
        raise TinyserveError(t("cli.hf.weights", path=path, missing=missing[:5], unexpected=unexpected[:5]))
    for k, tensor in ours.items():
        if tuple(tensor.shape) != tuple(expected[k].shape):
            raise TinyserveError(t("cli.hf.shape", path=path, name=k, shape=tuple(tensor.shape),
                                   expected=tuple(expected[k].shape)))
    if dtype is not None:
        dt = resolve_dtype(dtype, dev)
    else:
        # Keep the stored precision when tinyserve can run it there (float16 never; bfloat16 on cuda only).
        stored = {t.dtype for t in ours.values()}
        runnable = {torch.float32, torch.float64} | ({torch.bfloat16} if dev.type == "cuda" else set())
        dt = stored.pop() if len(stored) == 1 and stored <= runnable else torch.float32
    model.load_state_dict({k: t.to(dtype=dt) for k, t in ours.items()}, assign=True)
    return model.to(device=dev).eval()
