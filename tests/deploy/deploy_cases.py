"""What the deployment tests share: hand-made requests (EOS ignored, so a dry run knows every output length)."""
from __future__ import annotations

from tinyserve.core.request import Request
from tinyserve.core.workloads import make_prompt


def req(rid: str, prompt_len: int, max_new: int, arrival: float = 0.0, seed: int = 0) -> Request:
    """A request of a real-text prompt of prompt_len tokens that makes exactly max_new tokens."""
    return Request(rid, make_prompt(prompt_len, seed=seed), max_new, arrival, ignore_eos=True)
