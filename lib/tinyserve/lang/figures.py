"""What the gallery's story of a trace says (tinyserve.analysis.figures): who waits, and on what."""

WORDS = {
    # story(): one line per iteration, e.g. "iter  3: C:p1024 D:p1022 | paused: A, B"
    "figures.story.iter": {"en": "iter {k:>2}: ", "zh-TW": "迭代 {k:>2}："},
    "figures.story.paused": {"en": " | paused: {ids}", "zh-TW": " | 暫停：{ids}"},
    "figures.story.waiting": {"en": " | waiting: {groups}", "zh-TW": " | 等待：{groups}"},
    "figures.story.group": {"en": "{ids} ({why})", "zh-TW": "{ids}（{why}）"},
    "figures.story.sep": {"en": "; ", "zh-TW": "；"},
    # waiting(): why a request that has arrived computes nothing in this step
    "figures.why.batch": {"en": "the running batch must finish first (request-level batching)",
                          "zh-TW": "請求級批次：執行中的批次要先跑完"},
    "figures.why.cap": {"en": "batch cap: all {cap} slots busy",
                        "zh-TW": "批次上限：{cap} 個位子全滿"},
    "figures.why.budget": {"en": "token budget: this step already carries {tokens} of {budget} tokens",
                           "zh-TW": "token 預算：這一步已排了 {tokens} 個 token，上限 {budget}"},
    "figures.why.decode_first": {"en": "decode-first: waits until no decode is in flight",
                                 "zh-TW": "decode 優先：要等到沒有進行中的 decode"},
    # waiting_on(): the same limits in a few words
    "figures.limit.batch": {"en": "running batch", "zh-TW": "執行中的批次"},
    "figures.limit.cap": {"en": "batch cap", "zh-TW": "批次上限"},
    "figures.limit.budget": {"en": "token budget", "zh-TW": "token 預算"},
    "figures.limit.decode_first": {"en": "decode-first rule", "zh-TW": "decode 優先規則"},
}
