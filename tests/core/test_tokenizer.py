"""The byte-level tokenizer: any text round-trips; broken UTF-8 decodes to U+FFFD instead of raising."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyserve.core.tokenizer import BOS, EOS, VOCAB_SIZE, decode, encode

TEXTS = {
    "ascii": "Hello, batching! 123 ~`{}",
    "chinese": "連續批次",
    "emoji": "🚀🧠👩‍💻",  # 4-byte sequences and a zero-width-joiner sequence
    "mixed": "slot 3: 連續批次 → done ✅\n\ttab",
    "empty": "",
}


def test_special_ids() -> None:
    assert (BOS, EOS, VOCAB_SIZE) == (256, 257, 258)


@pytest.mark.parametrize("text", TEXTS.values(), ids=TEXTS.keys())
def test_round_trip(text: str) -> None:
    ids = encode(text)
    assert ids[0] == BOS
    assert ids[1:] == list(text.encode("utf-8"))  # one id per UTF-8 byte, nothing else
    assert all(0 <= i < 256 for i in ids[1:])
    assert decode(ids) == text
    assert encode(text, bos=False) == ids[1:]
    assert decode(encode(text, bos=False)) == text


def test_multibyte_lengths() -> None:
    assert len(encode("連續批次", bos=False)) == 12  # 4 CJK characters x 3 bytes
    assert len(encode("🚀", bos=False)) == 4


def test_special_ids_dropped_by_decode() -> None:
    assert decode([BOS, 72, 105, EOS]) == "Hi"
    assert decode([72, EOS, EOS, 105, BOS]) == "Hi"
    assert decode([BOS, EOS]) == ""
    assert decode([]) == ""


@pytest.mark.parametrize("ids, expected", [
    ([0xE9, 0x80], "\ufffd"),  # first two bytes of a 3-byte character (e.g. a truncated 連)
    ([0xFF], "\ufffd"),  # never valid in UTF-8
    ([0x80], "\ufffd"),  # a lone continuation byte
    ([0xF0, 0x9F, 0x9A], "\ufffd"),  # truncated emoji
    ([72, 0xFF, 105], "H\ufffdi"),  # the bad byte is replaced, its neighbours survive
    ([BOS, 0xE9, 0x80, EOS], "\ufffd"),
])
def test_invalid_utf8_decodes_to_replacement_char(ids: list[int], expected: str) -> None:
    assert decode(ids) == expected


def test_streamed_prefix_of_multibyte_text_never_raises() -> None:
    """A generation stopped mid-character (the normal case when decoding token by token) still decodes."""
    ids = encode("連續批次🚀", bos=False)
    for n in range(len(ids) + 1):
        text = decode(ids[:n])
        assert isinstance(text, str)
    assert decode(ids[:4]) == "連\ufffd"  # 3 bytes of 連, then 1 byte of 續
    assert decode(ids) == "連續批次🚀"


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_round_trips(text: str) -> None:
    assert decode(encode(text)) == text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=VOCAB_SIZE - 1), max_size=64))
def test_any_id_sequence_decodes(ids: list[int]) -> None:
    text = decode(ids)
    # Only bytes contribute text: an ids list without special tokens decodes to the same string.
    assert text == decode([i for i in ids if i < 256])
