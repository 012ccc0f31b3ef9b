"""Byte-level tokenizer: ids 0-255 are raw UTF-8 bytes, then BOS and EOS. Any text encodes."""
from __future__ import annotations

BOS = 256
EOS = 257
VOCAB_SIZE = 258


def encode(text: str, bos: bool = True) -> list[int]:
    """UTF-8 bytes of text, preceded by BOS unless bos=False."""
    return ([BOS] if bos else []) + list(text.encode("utf-8"))


def decode(ids: list[int]) -> str:
    """Text of the byte ids (BOS/EOS dropped); a partial or invalid UTF-8 sequence becomes U+FFFD, never an error."""
    return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")
