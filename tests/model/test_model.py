"""TinyGPT on its own: the ragged KV-cache step equals a full recompute, whatever else shares the step.

The reference everywhere is `model(idx)`, the plain full-sequence forward (causal SDPA, no cache). The engine
only ever calls `forward_step`, so if these agree, a sequence's tokens cannot depend on its batch-mates.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from helpers import ATOL, DEVICES, DTYPES, MODEL_KINDS, make_random_model
from safetensors import safe_open

import tinyserve
from tinyserve.core.request import check_length
from tinyserve.core.tokenizer import encode
from tinyserve.errors import TinyserveError
from tinyserve.model.gpt import PagedKV, SlabKV, TinyGPT, build_paged_step, build_step
from tinyserve.model.runner import CHECKPOINT_DIR, load_model, resolve_device, resolve_dtype, save_model

DTYPE_IDS = [str(d).removeprefix("torch.") for d in DTYPES]
pytestmark = pytest.mark.usefixtures("torch_one_thread")


def full_logits(model: TinyGPT, ids: list[int]) -> torch.Tensor:
    """(T, vocab) logits of the plain full forward: the reference."""
    with torch.inference_mode():
        return model(torch.tensor([ids], device=model.device))[0]


def step(model: TinyGPT, kv: SlabKV, segments: list[tuple[int, int, list[int]]], sample: list[bool]) -> torch.Tensor:
    """One ragged step through the engine's path."""
    return model.forward_step(build_step(segments, sample, model.device), kv)


def assert_logits_close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str = "") -> None:
    err = (got - want).abs().max().item()
    assert err <= ATOL[dtype], f"{what}: max |logit diff| {err:.3g} > {ATOL[dtype]:g}"


def text_ids(text: str, n: int | None = None) -> list[int]:
    """Prompt ids (BOS + UTF-8 bytes), cut or cycled to exactly n tokens when n is given."""
    ids = encode(text)
    if n is None:
        return ids
    return [ids[0]] + [ids[1 + i % (len(ids) - 1)] for i in range(n - 1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("device", DEVICES)
def test_incremental_decode_matches_full_recompute(get_model, kind: str, device: str, dtype: torch.dtype) -> None:
    model = get_model(kind, device, dtype)
    prompt = text_ids("The slot frees, the queue refills: 連續批次.")
    cont = encode(" and again!", bos=False)  # fixed tokens, so the check does not depend on argmax ties
    ref = full_logits(model, prompt + cont)
    kv = SlabKV(model.config, 1, len(prompt) + len(cont), dtype, model.device)
    got = step(model, kv, [(0, 0, prompt)], [True])
    assert got.shape == (1, model.config.vocab_size)
    assert_logits_close(got[0], ref[len(prompt) - 1], dtype, "prefill")
    for i, tok in enumerate(cont):
        pos = len(prompt) + i
        got = step(model, kv, [(0, pos, [tok])], [True])
        assert_logits_close(got[0], ref[pos], dtype, f"decode at position {pos}")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("device", DEVICES)
def test_ragged_step_equals_each_sequence_alone(get_model, kind: str, device: str, dtype: torch.dtype) -> None:
    """One step mixing a fresh prefill, a continuing chunk, decodes in non-contiguous slots and padding."""
    model = get_model(kind, device, dtype)
    seqs = {  # slot -> the sequence's full token list
        0: text_ids("Fresh prompt!"),  # A: prefilled whole in the ragged step
        1: text_ids("decode one", 9),  # C, D, E: decode one token in the ragged step
        2: text_ids("A long prompt arrives and is chunked. ", 31),  # B: chunked prefill
        3: text_ids("連續批次 decode", 17),
        4: text_ids("finished sequence, stale slab", 14),  # F: idle in the ragged step
        5: text_ids("🚀 go", 5),
    }
    kv = SlabKV(model.config, 6, 40, dtype, model.device)
    # Step 1 (setup): prefill everyone's history; B only its first chunk of 12; C/D/E all but the last token.
    hist = {1: 8, 2: 12, 3: 16, 4: 14, 5: 4}
    step(model, kv, [(s, 0, seqs[s][:n]) for s, n in hist.items()], [False] * len(hist))
    idle_k, idle_v = kv.k[:, 4].clone(), kv.v[:, 4].clone()

    # Step 2 (ragged), deliberately out of slot order.
    pad = text_ids("pad pad", 5)
    segments = [
        (3, 16, seqs[3][16:17]),  # decode
        (0, 0, seqs[0]),  # fresh prompt prefill
        (-1, 0, pad),  # padding: computed, attends to itself, stored nowhere
        (2, 12, seqs[2][12:25]),  # prefill chunk continuing at start > 0
        (5, 4, seqs[5][4:5]),  # decode
        (1, 8, seqs[1][8:9]),  # decode (slots 1, 3, 5 decode; 2 and 4 lie inside that range and do not)
    ]
    got = step(model, kv, segments, [True] * len(segments))
    assert got.shape == (len(segments), model.config.vocab_size)
    for row, (slot, start, toks) in enumerate(segments):
        ids = pad if slot < 0 else seqs[slot][:start + len(toks)]
        assert_logits_close(got[row], full_logits(model, ids)[-1], dtype, f"segment {row} (slot {slot})")
    assert torch.equal(kv.k[:, 4], idle_k) and torch.equal(kv.v[:, 4], idle_v), "an idle slot's slab changed"

    # Step 3: everyone continues from what step 2 wrote; wrong cache writes in step 2 would show up here.
    more = {0: [65], 1: [66], 3: [67], 5: [68]}
    segments = [(2, 25, seqs[2][25:31])] + [(s, len(seqs[s]), t) for s, t in more.items()]
    got = step(model, kv, segments, [True] * len(segments))
    for row, (slot, start, toks) in enumerate(segments):
        ids = seqs[2] if slot == 2 else seqs[slot] + toks
        assert_logits_close(got[row], full_logits(model, ids)[-1], dtype, f"step 3, slot {slot}")


def test_padding_segment_is_stored_nowhere(random_model: TinyGPT) -> None:
    kv = SlabKV(random_model.config, 2, 16, torch.float64, random_model.device)
    step(random_model, kv, [(-1, 0, text_ids("padding", 6)), (-1, 3, [1])], [True, True])
    assert not kv.k.any() and not kv.v.any()


@pytest.mark.parametrize("chunks", [[7, 13, 1, 19], [1, 39], [20, 20], [39, 1]], ids=str)
@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("device", DEVICES)
def test_chunked_prefill_equals_whole_prefill(get_model, kind: str, device: str, chunks: list[int]) -> None:
    dtype = torch.float64
    model = get_model(kind, device, dtype)
    prompt = text_ids("Chunked prefill splits a long prompt across steps. ", sum(chunks))
    whole = SlabKV(model.config, 1, len(prompt), dtype, model.device)
    want = step(model, whole, [(0, 0, prompt)], [True])
    ref = full_logits(model, prompt)
    chunked = SlabKV(model.config, 1, len(prompt), dtype, model.device)
    start = 0
    for n in chunks:
        got = step(model, chunked, [(0, start, prompt[start:start + n])], [True])
        assert_logits_close(got[0], ref[start + n - 1], dtype, f"chunk ending at {start + n}")
        start += n
    assert_logits_close(got, want, dtype, "last chunk vs whole prefill")
    assert (chunked.k - whole.k).abs().max() <= ATOL[dtype]
    assert (chunked.v - whole.v).abs().max() <= ATOL[dtype]


@pytest.mark.parametrize("text", ["Once upon a time", "連續批次"])
@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("device", DEVICES)
def test_generate_equals_greedy_full_recompute(get_model, kind: str, device: str, text: str) -> None:
    model = get_model(kind, device, torch.float64)  # float64: no argmax near-ties between the two paths
    prompt = encode(text)
    n = 12
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(full_logits(model, ids)[-1].argmax()))
    assert model.generate(prompt, n, stop_at_eos=False) == ids[len(prompt):]


def test_generate_stops_at_eos(random_model: TinyGPT) -> None:
    prompt = encode("stop here")
    free = random_model.generate(prompt, 6, stop_at_eos=False)
    # Declaring the first greedy token the EOS id must end generation right after it.
    assert random_model.generate(prompt, 6, eos=free[0]) == free[:1]
    assert random_model.generate(prompt, 6, stop_at_eos=False, eos=free[0]) == free


def test_generate_checks_length(random_model: TinyGPT) -> None:
    ctx = random_model.config.n_positions
    with pytest.raises(TinyserveError, match="context"):
        random_model.generate([1] * (ctx - 2), 3)
    with pytest.raises(TinyserveError, match="prompt"):
        random_model.generate([], 3)
    assert len(random_model.generate([1] * (ctx - 2), 2, stop_at_eos=False)) == 2  # exactly fills the context


def test_check_length_errors_name_the_argument() -> None:
    assert issubclass(TinyserveError, ValueError)
    check_length(7, 3, 10)  # exactly the context: fine
    with pytest.raises(TinyserveError, match=r"^prompt: empty"):
        check_length(0, 5, 10)
    with pytest.raises(TinyserveError, match=r"^max_new_tokens: must be >= 1, got 0"):
        check_length(3, 0, 10)
    with pytest.raises(TinyserveError, match=r"^prompt: 8 tokens \+ max_new_tokens 3 exceeds the context of 10"):
        check_length(8, 3, 10)


def test_resolve_device_and_dtype_errors() -> None:
    with pytest.raises(TinyserveError, match=r"^device: unknown 'tpu'"):
        resolve_device("tpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if torch.cuda.is_available():
        assert resolve_device("cuda").type == "cuda"
    else:
        with pytest.raises(TinyserveError, match=r"^device: cuda requested"):
            resolve_device("cuda")
    cpu = torch.device("cpu")
    assert resolve_dtype("float32", cpu) is torch.float32
    assert resolve_dtype("float64", cpu) is torch.float64
    with pytest.raises(TinyserveError, match=r"^dtype: unknown 'float16'"):
        resolve_dtype("float16", cpu)
    with pytest.raises(TinyserveError, match=r"^dtype: bfloat16 is supported on cuda only"):
        resolve_dtype("bfloat16", cpu)
    # the names the CLI and the engine check before torch loads are the ones torch is then asked for
    from tinyserve.core.config import DEVICES, DTYPE_BYTES
    from tinyserve.model.runner import DTYPES

    assert set(DTYPES) == set(DTYPE_BYTES) and set(DEVICES) == {"auto", "cpu", "cuda"}


@pytest.fixture
def saved_dir(tmp_path: Path) -> Path:
    """A small random checkpoint written with save_model (a stand-in that exists before training ends)."""
    save_model(make_random_model(n_positions=32, n_layer=2), tmp_path / "ckpt")
    return tmp_path / "ckpt"


def test_save_load_round_trip(saved_dir: Path) -> None:
    loaded = load_model(saved_dir, device="cpu", dtype="float64")
    original = make_random_model(n_positions=32, n_layer=2)
    assert loaded.config == original.config
    for (name, a), (_, b) in zip(loaded.state_dict().items(), original.state_dict().items()):
        # stored as float32: equal to the float64 original rounded to float32
        assert torch.equal(a, b.to(torch.float32).to(torch.float64)), name
    assert load_model(saved_dir, device="cpu").dtype == torch.float32
    assert not loaded.training


def test_load_model_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(TinyserveError, match=r"checkpoint: missing .*config\.json"):
        load_model(tmp_path / "nowhere", device="cpu")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "missing"])
def test_load_model_corrupt_weights(saved_dir: Path, damage: str) -> None:
    weights = saved_dir / "model.safetensors"
    data = weights.read_bytes()
    if damage == "garbage":
        weights.write_bytes(b"\x93NUMPY not a safetensors file" + bytes(range(256)) * 8)
    elif damage == "truncated":
        weights.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        weights.write_bytes(b"")
    else:
        weights.unlink()
    pattern = "missing" if damage == "missing" else "is corrupt or does not match the model"
    with pytest.raises(TinyserveError, match=pattern) as info:
        load_model(saved_dir, device="cpu")
    assert str(saved_dir) in str(info.value) and "\n" not in str(info.value)  # one clear line


@pytest.mark.parametrize("config", ['{"n_layer": 3, "n_positions": 32}', '{"n_positions": 32, "dropout": 0.1}',
                                    "{not json", "[1, 2]"])
def test_load_model_config_mismatch(saved_dir: Path, config: str) -> None:
    (saved_dir / "config.json").write_text(config)
    with pytest.raises(TinyserveError, match="is corrupt or does not match the model"):
        load_model(saved_dir, device="cpu")


def test_weights_file_is_safetensors(tmp_path: Path) -> None:
    """The shipped weights (or, before training ends, a fresh save) open with safetensors, no pickle."""
    ckpt = CHECKPOINT_DIR if (CHECKPOINT_DIR / "model.safetensors").is_file() else tmp_path
    if ckpt == tmp_path:
        save_model(make_random_model(n_positions=32), tmp_path)
    model = load_model(ckpt, device="cpu")
    with safe_open(str(ckpt / "model.safetensors"), framework="pt") as f:
        keys = set(f.keys())
        assert keys == set(model.state_dict())  # the tied head is stored once, as wte
        for k in keys:
            assert f.get_tensor(k).dtype == torch.float32


def test_no_pickle_loading_in_lib() -> None:
    lib = Path(tinyserve.__file__).parent
    sources = sorted(lib.rglob("*.py"))
    assert len(sources) >= 4
    banned = re.compile(r"torch\.load\b|\bpickle\b|\.load_state_dict\(torch\.load")
    offenders = [f"{p.relative_to(lib)}:{i}" for p in sources
                 for i, line in enumerate(p.read_text().splitlines(), 1) if banned.search(line)]
    assert offenders == []


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_a_ragged_step_through_block_tables_equals_each_sequence_alone(get_model, device: str, dtype: torch.dtype,
                                                                       block_size: int) -> None:
    """The paged layout: K/V written to (block, offset) and read back through each sequence's block table, the
    tables scattered and out of order; a decode, a fresh prefill, a chunk after a prefix and padding share a step."""
    model = get_model("random", device, dtype)
    seqs = {0: text_ids("Fresh prompt!"), 1: text_ids("decode one", 9), 2: text_ids("A long prompt is chunked. ", 31),
            3: text_ids("連續批次 decode", 17)}
    nb = sum(-(-len(s) // block_size) for s in seqs.values()) + 3
    order = torch.randperm(nb, generator=torch.Generator().manual_seed(block_size)).tolist()  # scattered blocks
    tables, taken = {}, 0
    for slot, s in seqs.items():
        n = -(-len(s) // block_size)
        tables[slot], taken = order[taken:taken + n], taken + n
    kv = PagedKV(model.config, nb, block_size, dtype, model.device)  # nb blocks of block_size positions

    def paged(segments, sample):
        return model.forward_step(build_paged_step(segments, sample, model.device, tables, block_size), kv)

    hist = {1: 8, 2: 12, 3: 16}
    paged([(s, 0, seqs[s][:n]) for s, n in hist.items()], [False] * len(hist))
    pad = text_ids("pad pad", 5)
    segments = [(3, 16, seqs[3][16:17]), (0, 0, seqs[0]), (-1, 0, pad), (2, 12, seqs[2][12:25]),
                (1, 8, seqs[1][8:9])]
    got = paged(segments, [True] * len(segments))
    for row, (slot, start, toks) in enumerate(segments):
        ids = pad if slot < 0 else seqs[slot][:start + len(toks)]
        assert_logits_close(got[row], full_logits(model, ids)[-1], dtype, f"segment {row} (slot {slot})")
    got = paged([(2, 25, seqs[2][25:31])], [True])  # continues from what the step above wrote
    assert_logits_close(got[0], full_logits(model, seqs[2])[-1], dtype, "chunk after a paged step")
