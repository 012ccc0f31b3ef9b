"""Notebook 7.6, the appendix (the evidence behind the modeled numbers): what its code cells print."""

WORDS = {
    "7.6.weights": {
        "en": "weights {size} at {tbps:,.2f} TB/s = {ms:.4g} ms a step",
        "zh-TW": "權重 {size}，以 {tbps:,.2f} TB/s 串流 = 每步 {ms:.4g} ms",
    },
    "7.6.flops": {
        "en": "{tflops:,.4g} TFLOP/s = {ms:.4g} ms of arithmetic a token; ridge {ridge:.4g} tokens",
        "zh-TW": "{tflops:,.4g} TFLOP/s = 每個 token 的運算 {ms:.4g} ms；脊點（ridge）{ridge:.4g} 個 token",
    },
    "7.6.measured": {
        "en": "measured {date} on {device} ({threads} thread, torch {torch})",
        "zh-TW": "{date} 在 {device} 上實測（{threads} 個執行緒，torch {torch}）",
    },
    "7.6.goals": {
        "en": "total time within 10%: {total} of {runs} runs; per-step median error within 15%: {step} of {runs}",
        "zh-TW": "總時間誤差在 10% 以內：{runs} 次執行中有 {total} 次；每步誤差的中位數在 15% 以內：{runs} 次中有 {step} 次",
    },
    "7.6.gap": {
        "en": "chunk {c:4d} (budget {budget:4d} tokens): worst gap {gap:6.1f} ms <= bound {bound:6.1f} ms: {ok}",
        "zh-TW": "chunk {c:4d}（預算 {budget:4d} 個 token）：最長間隔 {gap:6.1f} ms <= 上界 {bound:6.1f} ms：{ok}",
    },
}
