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
    # sweeps (tinyserve.analysis.sweeps): the capacity table, the ablation's rows, the CDF table
    "figures.cap.head": {"en": "P99 gap target:  ", "zh-TW": "P99 間隔目標：   "},
    "figures.cap.none": {"en": "none", "zh-TW": "無"},
    "figures.cap.at_least": {"en": "(>= : the highest rate tried still meets the target)",
                             "zh-TW": "（>= 表示：試過的最高到達率仍達到目標）"},
    "figures.cap.why_gap": {"en": "its P99 gap is already {ms:.0f} ms", "zh-TW": "它的 P99 間隔已是 {ms:.0f} ms"},
    "figures.cap.why_queue": {"en": "its median wait for a slot is already {s:.2f} s",
                              "zh-TW": "它等位子的中位數時間已是 {s:.2f} s"},
    "figures.cap.missed": {"en": "{label} meets no rate under {targets} ms: even at the lowest rate tried "
                                 "({rate:g} req/s) {why}.",
                           "zh-TW": "{label} 在 {targets} ms 的目標下沒有任何到達率達標：即使在試過的最低到達率"
                                    "（{rate:g} req/s），{why}。"},
    "figures.abl.mixing": {"en": "mixing alone", "zh-TW": "只混合"},
    "figures.abl.chunking": {"en": "chunking alone", "zh-TW": "只切 chunk"},
    "figures.abl.both": {"en": "both", "zh-TW": "兩者並用"},
    "figures.cdf.head": {"en": "{load:>5} {setting:<16} {ttft:>9} {p99:>7} {e2e:>9} {p99:>7}",
                         "zh-TW": "{load:>5} {setting:<16} {ttft:>9} {p99:>7} {e2e:>9} {p99:>7}"},
    "figures.cdf.load": {"en": "load", "zh-TW": "負載"},
    "figures.cdf.setting": {"en": "setting", "zh-TW": "設定"},
    "figures.cdf.ttft": {"en": "TTFT p50", "zh-TW": "TTFT p50"},
    "figures.cdf.e2e": {"en": "e2e p50", "zh-TW": "端到端 p50"},
}
