"""Notebook 7.5 (the figures you know, run on a real engine): what its code cells print and draw."""

WORDS = {
    "7.5.axis.iteration": {"en": "iteration", "zh-TW": "迭代"},
    # 1. Anyscale's grid
    "7.5.any.predict": {"en": "Decode tokens computed for already-finished sequences (static, 4 slots)?",
                        "zh-TW": "靜態批次、4 個位子：替已經完成的序列算了幾個 decode token？"},
    "7.5.any.static": {"en": "static batching:", "zh-TW": "靜態批次："},
    "7.5.any.cont": {"en": "continuous batching:", "zh-TW": "連續批次："},
    "7.5.any.figure": {"en": "figure: S3 stops after iteration 2, S2 after 6; S3's row stays taken until 6;\n"
                             "        S5-S7 take freed rows",
                       "zh-TW": "原圖：S3 在迭代 2 之後結束，S2 在 6 之後；S3 那一列卻一直被佔到 6；\n"
                                "      S5–S7 補進空出來的列"},
    "7.5.any.engine": {"en": "engine: S3's tokens in iterations {s3}, its slot computes until iteration {until}\n"
                             "        (thrown away in {thrown}); S2's last token in {s2_last}",
                       "zh-TW": "引擎：S3 的 token 出自迭代 {s3}，它的位子卻一直算到迭代 {until}\n"
                                "      （迭代 {thrown} 算出的都丟掉了）；S2 的最後一個 token 出自迭代 {s2_last}"},
    "7.5.any.engine_cont": {"en": "engine, continuous:", "zh-TW": "引擎，連續批次："},
    "7.5.any.enters": {"en": "        {r} enters at iteration {it} in slot {slot} (was {was}'s)",
                       "zh-TW": "      {r} 在迭代 {it} 進入位子 {slot}（原本是 {was} 的）"},
    "7.5.any.summary": {"en": "continuous: {wasted} wasted, done in {n} iterations instead of {m}",
                        "zh-TW": "連續批次：浪費 {wasted} 個，{n} 次迭代就跑完（靜態批次要 {m} 次）"},
    "7.5.any.title.static": {"en": "static, 4 slots", "zh-TW": "靜態批次，4 個位子"},
    "7.5.any.title.cont": {"en": "continuous, 4 slots", "zh-TW": "連續批次，4 個位子"},
    # 2. Orca, Figure 3
    "7.5.orca.predict": {"en": "Tokens computed for x2 after it is done (request-level batching)?",
                         "zh-TW": "整批一起排程時，x2 完成之後還替它算了幾個 token？"},
    "7.5.orca.static": {"en": "request-level (static):", "zh-TW": "請求級（靜態批次）："},
    "7.5.orca.cont": {"en": "iteration-level (continuous):", "zh-TW": "迭代級（連續批次）："},
    "7.5.orca.figure": {"en": "figure: x2 ends at iteration 2, yet iterations 3 and 4 still compute it",
                        "zh-TW": "原圖：x2 在迭代 2 就結束了，迭代 3 和 4 卻還在算它"},
    "7.5.orca.engine": {"en": "engine: x2's tokens in iterations {its} under both;\n"
                              "        static computes it again in {static}, continuous in {cont}",
                        "zh-TW": "引擎：兩種排程下，x2 的 token 都出自迭代 {its}；\n"
                                 "      之後又算它的迭代：靜態批次 {static}，連續批次 {cont}"},
    "7.5.orca.title.static": {"en": "request-level (static)", "zh-TW": "請求級（靜態批次）"},
    "7.5.orca.title.cont": {"en": "iteration-level (continuous)", "zh-TW": "迭代級（連續批次）"},
    # 3. TensorRT-LLM's frames
    "7.5.trt.predict": {"en": "Tokens in the second iteration, without chunking?",
                        "zh-TW": "不切 chunk 時，第二次迭代帶了幾個 token？"},
    "7.5.trt.figure": {"en": "figure: frame 2 R3 blocked by the budget; frame 3 R5 blocked by the batch cap;\n"
                             "        frame 4 R1 evicted, R5 in",
                       "zh-TW": "原圖：第 2 張 R3 被預算擋下；第 3 張 R5 被批次上限擋下；\n"
                                "      第 4 張 R1 被逐出，R5 進來"},
    "7.5.trt.engine": {"en": "engine: iteration 1 R3 waits on the {r3}; iteration 2 R5 waits on the {r5};\n"
                             "        R1 computes in {r1_its}, R5 from {r5_from}",
                       "zh-TW": "引擎：迭代 1 的 R3 卡在「{r3}」；迭代 2 的 R5 卡在「{r5}」；\n"
                                "      R1 在迭代 {r1_its} 計算，R5 從迭代 {r5_from} 開始"},
    "7.5.trt.whole": {"en": "without context chunking (TensorRT-LLM's frames 2-4):",
                      "zh-TW": "不做 context chunking（TensorRT-LLM 的第 2–4 張圖）："},
    "7.5.trt.chunk": {"en": "with context chunking (our chunked policy):",
                      "zh-TW": "做 context chunking（我們的 chunked 策略）："},
    "7.5.trt.tokens": {"en": "tokens per iteration: {tokens}", "zh-TW": "每次迭代的 token 數：{tokens}"},
    "7.5.trt.title.whole": {"en": "whole prompts only", "zh-TW": "只收整段提示詞"},
    "7.5.trt.title.chunk": {"en": "context chunking", "zh-TW": "context chunking"},
    # 4. Sarathi-Serve, Figure 7
    "7.5.sar.predict": {"en": "A's longest gap between two tokens under Orca's rule?",
                        "zh-TW": "照 Orca 的規則，A 的兩個 token 之間最長隔多久？"},
    "7.5.sar.figure": {"en": "figure: vLLM and Orca stall A and B while C and D prefill; FasterTransformer keeps A and B\n"
                             "        going but holds C and D back; Sarathi-Serve does neither",
                       "zh-TW": "原圖：C、D 做 prefill 時，vLLM 和 Orca 讓 A、B 停下來等；FasterTransformer 讓 A、B\n"
                                "      繼續跑，卻把 C、D 擋在外面；Sarathi-Serve 兩樣都不會"},
    "7.5.sar.engine": {"en": "engine: a decode-only iteration takes {ms:.1f} ms",
                       "zh-TW": "引擎：只有 decode 的一次迭代要 {ms:.1f} ms"},
    "7.5.sar.panel": {"en": "{name}:", "zh-TW": "{name}："},
    "7.5.sar.gaps": {"en": "  A's longest gap {gap:.1f} ms; C's first token {ttft:.1f} ms after it arrived",
                     "zh-TW": "  A 最長的間隔 {gap:.1f} ms；C 到達後 {ttft:.1f} ms 才出第一個 token"},
    # 5. vLLM, Figures 2 and 3
    "7.5.kv.predict": {"en": "Percentage of reserved KV holding tokens after iteration 1?",
                       "zh-TW": "迭代 1 剛跑完時，保留的 KV 有百分之幾存著 token？"},
    "7.5.kv.figure": {"en": "figure: A's reservation is 2,048 positions, B's 512; most of both hold nothing yet",
                      "zh-TW": "原圖：A 保留 2,048 個位置，B 保留 512 個；兩者大部分都還空著"},
    "7.5.kv.step": {"en": "iteration {it:>4}: {n} request(s), {slab:,} positions reserved per slot, "
                          "KV used {used:6.1%} of what is reserved",
                    "zh-TW": "迭代 {it:>4}：{n} 個請求，每個位子保留 {slab:,} 個位置，KV 只用掉保留量的 {used:6.1%}"},
    "7.5.kv.share.context": {"en": "slab = the whole context (4,096)     KV holding tokens: {share:5.1%}",
                             "zh-TW": "slab = 整個上下文長度（4,096）       存著 token 的 KV：{share:5.1%}"},
    "7.5.kv.share.longest": {"en": "slab = this run's longest request    KV holding tokens: {share:5.1%}",
                             "zh-TW": "slab = 這次執行中最長的請求          存著 token 的 KV：{share:5.1%}"},
    # 6. the sweeps
    "7.5.abl.predict": {"en": "Lowest P99 gap: 1 (mixing alone), 2 (chunking alone) or 3 (both)?",
                        "zh-TW": "P99 間隔最低的是哪個：1（只混合）、2（只切 chunk）還是 3（兩者都做）？"},
    "7.5.abl.head": {"en": "                  P50 TTFT   P99 gap   (ms, modeled)",
                     "zh-TW": "                  P50 TTFT  P99 間隔   （ms，模型推算）"},
    "7.5.knob.spread": {"en": "output spread", "zh-TW": "輸出長度分散"},
    "7.5.knob.load": {"en": "load", "zh-TW": "負載"},
}
