"""What the exercise notebooks' own code cells print (chapters/solutions/7.x-exercises.ipynb); keys "ex.7.x.…".

The checks' messages and the self-check's report are in classroom.py.
"""
from __future__ import annotations

WORDS: dict[str, dict[str, str]] = {
    "ex.7.1.a_demo": {
        "en": "{rid} prompt {tokens} tokens, padding {padding}",
        "zh-TW": "{rid} 提示詞 {tokens} 個 token，padding {padding} 個"},
    "ex.7.3.j_demo": {
        "en": "chunk {chunk:5}: worst gap {gap:6.1f} ms   newcomer TTFT {ttft:7.1f} ms",
        "zh-TW": "chunk {chunk:5}：最差間隔 {gap:6.1f} ms　新到者 TTFT {ttft:7.1f} ms"},
    "ex.7.4.n_demo": {
        "en": "reserved peak {reserved:,} bytes, used peak {used:,} bytes ({share:.1%} of the reservation)",
        "zh-TW": "預留峰值 {reserved:,} 位元組，實際使用峰值 {used:,} 位元組（占預留的 {share:.1%}）"},
}
