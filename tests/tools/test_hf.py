"""Parity with transformers' GPT2LMHeadModel: the export loads cleanly and computes the same numbers.

transformers is a test dependency (installed in CI); it is imported directly so a broken install fails here
instead of being skipped.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from helpers import ATOL, DEVICES, DTYPES, MODEL_KINDS
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2LMHeadModel

from tinyserve.core.tokenizer import BOS, EOS, decode, encode
from tinyserve.errors import TinyserveError
from tinyserve.model.gpt import SlabKV, TinyGPT, build_step
from tinyserve.tools.hf import export_hf, load_hf, to_hf_model

DTYPE_IDS = [str(d).removeprefix("torch.") for d in DTYPES]
pytestmark = pytest.mark.usefixtures("torch_one_thread")
LONG = "Continuous batching refills a slot the moment a sequence finishes. "
PROMPTS = {
    "ascii": encode("Hello"),
    "chinese": encode("連續批次"),
    "emoji": encode("🚀 ok"),
    "long300": (encode(LONG) * 6)[:300],
}
_EXPORTS: dict[tuple[str, torch.dtype], Path] = {}


@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory, get_model):
    """exported(kind, dtype) -> a folder written by export_hf, once per session."""
    def get(kind: str, dtype: torch.dtype) -> Path:
        if (kind, dtype) not in _EXPORTS:
            out = tmp_path_factory.mktemp(f"hf-{kind}-{str(dtype).removeprefix('torch.')}")
            _EXPORTS[kind, dtype] = export_hf(get_model(kind, "cpu", dtype), out)
        return _EXPORTS[kind, dtype]
    return get


def load_exported(path: Path, device: str | torch.device, dtype: torch.dtype) -> GPT2LMHeadModel:
    return GPT2LMHeadModel.from_pretrained(path, dtype=dtype).to(device).eval()


def ours_full(model: TinyGPT, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(torch.tensor([ids], device=model.device))[0]


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.detach().to(torch.float64) - b.detach().to(torch.float64)).abs().max().item()


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_export_loads_cleanly(get_model, exported, capfd, kind: str, dtype: torch.dtype) -> None:
    model = get_model(kind, "cpu", dtype)
    out = exported(kind, dtype)
    assert {p.name for p in out.iterdir()} == {"config.json", "generation_config.json", "model.safetensors",
                                               "tokenizer.json", "tokenizer_config.json"}
    capfd.readouterr()
    hf, info = GPT2LMHeadModel.from_pretrained(out, output_loading_info=True)  # dtype "auto": from config.json
    logged = capfd.readouterr().err.lower()
    assert info == {"missing_keys": set(), "unexpected_keys": set(), "mismatched_keys": set(), "error_msgs": []}
    for word in ("missing", "unexpected", "newly initialized", "not used", "mismatch"):
        assert word not in logged, f"transformers warned while loading: {logged[-500:]}"
    assert hf.dtype == dtype
    assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()  # tied, as ours

    cfg, c = model.config, json.loads((out / "config.json").read_text())
    assert (c["model_type"], c["activation_function"], c["tie_word_embeddings"]) == ("gpt2", "gelu_new", True)
    assert (c["vocab_size"], c["bos_token_id"], c["eos_token_id"]) == (258, BOS, EOS)
    assert (c["n_positions"], c["n_embd"], c["n_layer"], c["n_head"]) == (
        cfg.n_positions, cfg.n_embd, cfg.n_layer, cfg.n_head)
    assert c["layer_norm_epsilon"] == cfg.layer_norm_eps
    assert c["resid_pdrop"] == c["embd_pdrop"] == c["attn_pdrop"] == 0
    g = json.loads((out / "generation_config.json").read_text())
    assert (g["bos_token_id"], g["eos_token_id"], g["pad_token_id"]) == (BOS, EOS, EOS)

    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        keys = set(f.keys())
        d = cfg.n_embd
        assert f.get_slice("transformer.h.0.attn.c_attn.weight").get_shape() == [d, 3 * d]  # Conv1D: (in, out)
        assert f.get_slice("transformer.h.0.mlp.c_proj.weight").get_shape() == [4 * d, d]
    want = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"}
    for i in range(cfg.n_layer):
        for m in ("ln_1", "ln_2", "attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
            want |= {f"transformer.h.{i}.{m}.weight", f"transformer.h.{i}.{m}.bias"}
    assert keys == want


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("device", DEVICES)
def test_logits_match(get_model, exported, kind: str, device: str, dtype: torch.dtype) -> None:
    model = get_model(kind, device, dtype)
    from_disk = load_exported(exported(kind, dtype), device, dtype)
    in_memory = to_hf_model(model)
    assert in_memory.dtype == dtype and in_memory.device == model.device and not in_memory.training
    for name, ids in PROMPTS.items():
        ours = ours_full(model, ids)
        x = torch.tensor([ids], device=model.device)
        with torch.no_grad():
            for how, hf in (("from_pretrained", from_disk), ("to_hf_model", in_memory)):
                err = max_diff(hf(x).logits[0], ours)
                assert err <= ATOL[dtype], f"{name} via {how}: max |logit diff| {err:.3g}"


@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("device", DEVICES)
def test_greedy_generate_matches(get_model, exported, kind: str, device: str) -> None:
    """HF greedy decoding (float64, EOS disabled) picks the same tokens as ours, incl. a 300-token prompt."""
    model = get_model(kind, device, torch.float64)
    hf = load_exported(exported(kind, torch.float64), device, torch.float64)
    # Both must be cleared, else transformers still stops at 257 (DESIGN.md, "Hard-won facts").
    hf.generation_config.eos_token_id = None
    hf.config.eos_token_id = None
    n = 10
    for name in ("ascii", "chinese", "long300"):
        ids = PROMPTS[name]
        x = torch.tensor([ids], device=model.device)
        out = hf.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                          do_sample=False, num_beams=1, pad_token_id=EOS)
        theirs = out[0, len(ids):].tolist()
        assert len(theirs) == n
        assert model.generate(ids, n, stop_at_eos=False) == theirs, name


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_load_hf_round_trip(get_model, exported, tmp_path: Path, kind: str, dtype: torch.dtype) -> None:
    model = get_model(kind, "cpu", dtype)
    back = load_hf(exported(kind, dtype), device="cpu")
    assert back.config == model.config and back.dtype == dtype and not back.training
    ours, theirs = model.state_dict(), back.state_dict()
    assert ours.keys() == theirs.keys()
    for k in ours:
        assert torch.equal(ours[k], theirs[k]), k

    # A folder saved by transformers itself, and a bare GPT2Model (no "transformer." prefix), load the same.
    hf = GPT2LMHeadModel.from_pretrained(exported(kind, dtype))
    hf.save_pretrained(tmp_path / "lm")
    hf.transformer.save_pretrained(tmp_path / "bare")
    hf.save_pretrained(tmp_path / "sharded", max_shard_size="300KB")
    assert len(list((tmp_path / "sharded").glob("*.safetensors"))) > 1
    for folder in ("lm", "bare", "sharded"):
        _copy_tokenizer(exported(kind, dtype), tmp_path / folder)
        again = load_hf(tmp_path / folder, device="cpu")
        assert all(torch.equal(ours[k], t) for k, t in again.state_dict().items()), folder
    assert load_hf(exported(kind, dtype), device="cpu", dtype="float32").dtype == torch.float32


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("device", DEVICES)
def test_padded_hf_batch_matches_ragged_step(get_model, kind: str, device: str, dtype: torch.dtype) -> None:
    """A left-padded HF batch (what static batching computes) equals our ragged step, per sequence."""
    model = get_model(kind, device, dtype)
    hf = to_hf_model(model)
    dev = model.device
    prompts = [encode("Static batching pads."), encode("連續"), [BOS], encode("a decode-heavy mix of lengths")]
    # Fixed next tokens instead of argmax, so ties in float32 cannot make the two paths diverge.
    nexts = [[65, 66], [0xE6, 0x89], [67, 68], [69, 70]]

    kv = SlabKV(model.config, len(prompts), 64, dtype, dev)
    segments = [(slot, 0, p) for slot, p in enumerate(prompts)]
    seqs = [list(p) for p in prompts]
    for r in range(len(nexts[0]) + 1):
        ours = model.forward_step(build_step(segments, [True] * len(segments), dev), kv)
        width = max(map(len, seqs))
        ids = torch.tensor([[EOS] * (width - len(s)) + s for s in seqs], device=dev)  # left padding
        mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs], device=dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.no_grad():
            theirs = hf(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).logits[:, -1]
        for i in range(len(seqs)):
            err = max_diff(ours[i], theirs[i])
            assert err <= ATOL[dtype], f"round {r}, sequence {i} (len {len(seqs[i])}): {err:.3g}"
        if r < len(nexts[0]):  # everyone decodes one token next step
            segments = [(slot, len(seqs[slot]), [nexts[slot][r]]) for slot in range(len(seqs))]
            for slot in range(len(seqs)):
                seqs[slot].append(nexts[slot][r])


def test_missing_transformers_is_a_clear_error(monkeypatch, random_model: TinyGPT, exported, tmp_path) -> None:
    path = exported("random", torch.float64)
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` raise ImportError
    msg = "transformers is not installed: pip install 'transformers==5.24.0'"
    with pytest.raises(TinyserveError) as info:
        to_hf_model(random_model)
    assert str(info.value) == msg
    with pytest.raises(TinyserveError, match="transformers is not installed"):
        export_hf(random_model, tmp_path / "out")
    assert load_hf(path, device="cpu").config == random_model.config  # loading back never needs transformers


def _copy_tokenizer(src: Path, dst: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (dst / name).write_bytes((src / name).read_bytes())


def _copy_export(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_load_hf_errors(exported, tmp_path: Path) -> None:
    src = exported("random", torch.float64)
    with pytest.raises(TinyserveError, match="load-hf: missing .*config.json"):
        load_hf(tmp_path / "nowhere", device="cpu")

    pickled = _copy_export(src, tmp_path / "pickled")
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    with pytest.raises(TinyserveError, match="never unpickles"):
        load_hf(pickled, device="cpu")

    corrupt = _copy_export(src, tmp_path / "corrupt")
    (corrupt / "model.safetensors").write_bytes(b"garbage" * 100)
    with pytest.raises(TinyserveError, match="model.safetensors is corrupt"):
        load_hf(corrupt, device="cpu")

    relu = _copy_export(src, tmp_path / "relu")
    cfg = json.loads((relu / "config.json").read_text())
    (relu / "config.json").write_text(json.dumps({**cfg, "activation_function": "relu"}))
    with pytest.raises(TinyserveError, match="activation_function 'relu'"):
        load_hf(relu, device="cpu")

    shape = _copy_export(src, tmp_path / "shape")
    (shape / "config.json").write_text(json.dumps({**cfg, "n_positions": 64}))
    with pytest.raises(TinyserveError, match=r"wpe.weight has shape \(512, 128\)"):
        load_hf(shape, device="cpu")

    untied = _copy_export(src, tmp_path / "untied")
    with safe_open(str(src / "model.safetensors"), framework="pt") as f:
        state = {k: f.get_tensor(k) for k in f.keys()}
    save_file({**state, "lm_head.weight": state["transformer.wte.weight"] + 1}, str(untied / "model.safetensors"))
    with pytest.raises(TinyserveError, match="untied head"):
        load_hf(untied, device="cpu")

    missing = _copy_export(src, tmp_path / "missing")
    del state["transformer.h.0.ln_1.bias"]
    save_file(state, str(missing / "model.safetensors"))
    with pytest.raises(TinyserveError, match=r"missing \['h.0.ln_1.bias'\]"):
        load_hf(missing, device="cpu")


def test_load_hf_float16_folder_becomes_float32(exported, tmp_path: Path) -> None:
    """tinyserve does not compute in float16, so such a folder loads as float32 (dtype=None)."""
    hf = GPT2LMHeadModel.from_pretrained(exported("random", torch.float64), dtype=torch.float16)
    hf.save_pretrained(tmp_path / "half")
    _copy_tokenizer(exported("random", torch.float64), tmp_path / "half")
    model = load_hf(tmp_path / "half", device="cpu")
    assert model.dtype == torch.float32
    assert torch.equal(model.wte.weight, hf.transformer.wte.weight.float())
    assert torch.equal(model.h[1].mlp.c_fc.weight, hf.transformer.h[1].mlp.c_fc.weight.float().T)


def test_export_hf_to_a_file_is_a_clear_error(random_model: TinyGPT, tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.write_text("not a folder")
    with pytest.raises(TinyserveError, match="exists and is not a directory"):
        export_hf(random_model, target)
    with pytest.raises(TinyserveError, match="cannot write"):
        export_hf(random_model, target / "below")


# ---- the tokenizer travels with the export (issue #13) ------------------------------------------------------
TEXTS = {"ascii": "def f(x):\n\treturn x  # ok", "chinese": "連續批次", "emoji": "🚀 ok 👩‍👩‍👧", "empty": "",
         "control": "\x00\r\n\x7f", "special-spelling": "<|bos|>x<|eos|>"}


@pytest.mark.parametrize("name", TEXTS)
def test_auto_tokenizer_encodes_as_ours(exported, name: str) -> None:
    """AutoTokenizer on the export gives tinyserve.core.tokenizer's ids: BOS, then the UTF-8 bytes."""
    text = TEXTS[name]
    tok = AutoTokenizer.from_pretrained(exported("random", torch.float64))
    # By hand: BOS (256) then the UTF-8 bytes, e.g. "連" is e9 80 a3 = 233, 128, 163.
    want = [256] + list(text.encode("utf-8"))
    assert encode(text) == want
    assert tok(text)["input_ids"] == want
    assert tok.decode(want, skip_special_tokens=True) == text == decode(want)
    assert (tok.bos_token_id, tok.eos_token_id) == (BOS, EOS)


def test_auto_classes_load_the_export_and_agree(exported) -> None:
    """AutoModelForCausalLM + AutoTokenizer, as a server loads them: text in, our greedy tokens out."""
    path = exported("random", torch.float64)
    tok = AutoTokenizer.from_pretrained(path)
    hf = AutoModelForCausalLM.from_pretrained(path)
    assert isinstance(hf, GPT2LMHeadModel) and hf.dtype == torch.float64
    assert json.loads((path / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    x = tok("連續 ok", return_tensors="pt")
    with torch.no_grad():
        hf_out = hf.generate(**x, max_new_tokens=6, min_new_tokens=6, do_sample=False, pad_token_id=EOS)
    ours = load_hf(path, device="cpu").generate(encode("連續 ok"), 6, stop_at_eos=False)
    assert hf_out[0, x["input_ids"].shape[1]:].tolist() == ours


def test_load_hf_refuses_a_folder_without_our_tokenizer(exported, tmp_path: Path) -> None:
    src = exported("random", torch.float64)
    bare = _copy_export(src, tmp_path / "no-tokenizer")
    (bare / "tokenizer.json").unlink()
    (bare / "tokenizer_config.json").unlink()
    with pytest.raises(TinyserveError, match="has no tokenizer.json"):
        load_hf(bare, device="cpu")
    assert load_hf(bare, device="cpu", require_tokenizer=False).config.vocab_size == 258  # on purpose only

    # Another tokenizer (ids shifted by one: 'a' would be 98) is not ours either.
    other = _copy_export(src, tmp_path / "other")
    raw = json.loads((other / "tokenizer.json").read_text())
    raw["model"]["vocab"] = {ch: (i + 1) % 256 for ch, i in raw["model"]["vocab"].items()}
    (other / "tokenizer.json").write_text(json.dumps(raw))
    with pytest.raises(TinyserveError, match="not the byte-level tokenizer"):
        load_hf(other, device="cpu")

    # Same vocabulary, but the text "<|eos|>" would become token 257 (the flag that splits it is gone).
    unsplit = _copy_export(src, tmp_path / "unsplit")
    cfg = json.loads((unsplit / "tokenizer_config.json").read_text())
    (unsplit / "tokenizer_config.json").write_text(json.dumps({**cfg, "split_special_tokens": False}))
    with pytest.raises(TinyserveError, match="encodes .* not as tinyserve.core.tokenizer does"):
        load_hf(unsplit, device="cpu")

    garbage = _copy_export(src, tmp_path / "garbage")
    (garbage / "tokenizer.json").write_text("{not json")
    with pytest.raises(TinyserveError, match="not a tokenizers JSON file"):
        load_hf(garbage, device="cpu")


def test_export_hf_command(tmp_path: Path) -> None:
    """`tinyserve export-hf DIR --dtype float64`: the shipped model, its tokenizer, float64 recorded for loaders."""
    import os
    import subprocess
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = [sys.executable, "-m", "tinyserve", "export-hf"]
    p = subprocess.run(run + [str(tmp_path / "tiny"), "--dtype", "float64"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "tiny" / "config.json").read_text())["dtype"] == "float64"
    assert AutoTokenizer.from_pretrained(tmp_path / "tiny")("連")["input_ids"] == [BOS, 0xE9, 0x80, 0xA3]
    bad = subprocess.run(run + [str(tmp_path / "x"), "--dtype", "float16"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "float16" in bad.stderr
