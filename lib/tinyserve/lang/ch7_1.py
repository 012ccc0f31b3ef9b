"""Notebook 7.1 (static batching and the fastest finisher): what its code cells print and draw."""

WORDS = {
    # 1. padding
    "7.1.predict.padding": {
        "en": "How many prompt tokens will the engine compute for the 50-token request?",
        "zh-TW": "引擎會替那個 50 個 token 的請求算多少個提示詞 token？",
    },
    "7.1.unit.tokens": {"en": "tokens", "zh-TW": "個 token"},
    "7.1.padding_row": {
        "en": "short prompt: {prompt} tokens, computed {computed} prefill tokens ({padding} of them padding)",
        "zh-TW": "短提示詞：{prompt} 個 token，實際算了 {computed} 個 prefill token（其中 {padding} 個是 padding）",
    },
    "7.1.padding_chapter": {
        "en": "the chapter: a 50-token prompt beside a 4,000-token one pays for 80x the prefill it needs",
        "zh-TW": "書中：50 個 token 的提示詞和 4,000 個 token 的同組，prefill 的花費是它真正需要的 80 倍",
    },
    "7.1.padding_engine": {
        "en": "the engine:  it computed {ratio:.1f}x its own prefill",
        "zh-TW": "引擎：它算了自己所需 prefill 的 {ratio:.1f} 倍",
    },
    "7.1.padding_modeled": {
        "en": "modeled: its prefill alone would take {alone:.1f} ms; "
              "the padded group's prefill step took {padded:.1f} ms",
        "zh-TW": "模型推算：它單獨 prefill 只要 {alone:.1f} ms；補了 padding 的整組 prefill 花了 {padded:.1f} ms",
    },
    "7.1.legend.own_prompt": {"en": "its own prompt", "zh-TW": "自己的提示詞"},
    "7.1.legend.padding": {"en": "padding", "zh-TW": "padding"},
    "7.1.prompt_tick": {"en": "{n}-token prompt", "zh-TW": "{n} 個 token 的提示詞"},
    "7.1.x_padding": {
        "en": "prompt tokens computed in the group's prefill",
        "zh-TW": "整組 prefill 實際計算的提示詞 token 數",
    },
    "7.1.title_padding": {
        "en": "the short prompt is computed as if it were as long as the longest",
        "zh-TW": "短提示詞被當成和最長的一樣長來計算",
    },
    # 2. the fastest finisher
    "7.1.predict.slot7": {
        "en": "How many of slot 7's decode steps are wasted?",
        "zh-TW": "位子 7 的 decode 步驟裡，有幾步是浪費的？",
    },
    "7.1.unit.steps": {"en": "steps", "zh-TW": "步"},
    "7.1.real_run": {
        "en": "real model, long answer {long} tokens: {steps} steps, {wasted} wasted decode tokens",
        "zh-TW": "真實模型，長回答 {long} 個 token：共 {steps} 步，浪費 {wasted} 個 decode token",
    },
    "7.1.dry_same": {
        "en": "the dry run computes the very same steps: {same}",
        "zh-TW": "dry run 算出的每一步都一模一樣：{same}",
    },
    "7.1.group_steps": {
        "en": "the first group runs {steps} steps: 1 prefill + {decodes} decode steps",
        "zh-TW": "第一組共跑 {steps} 步：1 步 prefill + {decodes} 步 decode",
    },
    "7.1.slot7": {
        "en": "slot 7: {decodes} decode steps, {useful} useful, {wasted} wasted",
        "zh-TW": "位子 7：{decodes} 步 decode，{useful} 步有用，{wasted} 步浪費",
    },
    "7.1.finisher_chapter": {
        "en": "the chapter: 31 of 32 slots spend 99% of the time making tokens that are thrown away",
        "zh-TW": "書中：32 個位子裡有 31 個，99% 的時間都在算之後要丟掉的 token",
    },
    "7.1.finisher_engine": {
        "en": "the engine:  {slots} slots spend at least {share:.1%} of their decode steps on them",
        "zh-TW": "引擎：{slots} 個位子至少把 {share:.1%} 的 decode 步驟花在這種 token 上",
    },
    "7.1.title_timeline": {
        "en": "static, B=32: 63 requests (r0 wants 2,000 tokens, the rest 20)",
        "zh-TW": "靜態批次，B=32：63 個請求（r0 要 2,000 個 token，其餘各要 20 個）",
    },
    # 3. throughput and the tail
    "7.1.first_group_done": {
        "en": "20-token requests in the first group: done after {s:.2f} s (modeled)",
        "zh-TW": "第一組裡 20 個 token 的請求：{s:.2f} s 後完成（模型推算）",
    },
    "7.1.second_group_done": {
        "en": "20-token requests queued for the second group: done after {s:.2f} s",
        "zh-TW": "排隊等第二組的 20 個 token 請求：{s:.2f} s 後完成",
    },
    "7.1.throughput": {
        "en": "traffic asks for {asked:.1f} output tokens/s; the server delivers {delivered:.1f} tokens/s",
        "zh-TW": "流量每秒要 {asked:.1f} 個輸出 token；伺服器每秒交出 {delivered:.1f} 個",
    },
    "7.1.e2e": {
        "en": "end-to-end latency p50 {p50:.1f} s, p99 {p99:.1f} s (modeled)",
        "zh-TW": "端到端延遲 p50 {p50:.1f} s，p99 {p99:.1f} s（模型推算）",
    },
    "7.1.tail_chapter": {
        "en": "the chapter: the tail belongs to whichever long request happened to share the group",
        "zh-TW": "書中：尾端延遲取決於哪個長請求剛好排進同一組",
    },
    "7.1.tail_engine": {
        "en": "the engine:  short answers (<= 50 tokens) grouped with a >= 300-token answer: p50 {with_long:.1f} s;"
              " without one: {without:.1f} s",
        "zh-TW": "引擎：短回答（<= 50 個 token）和 >= 300 個 token 的回答同組時 p50 {with_long:.1f} s；"
                 "沒有這種同伴時 {without:.1f} s",
    },
    "7.1.colorbar_longest": {"en": "longest answer in its group (tokens)", "zh-TW": "同組最長的回答（token）"},
    "7.1.x_own_length": {"en": "the request's own answer length (tokens)", "zh-TW": "請求本身的回答長度（token）"},
    "7.1.y_e2e": {"en": "end-to-end latency (s, modeled)", "zh-TW": "端到端延遲（s，模型推算）"},
    "7.1.title_scatter": {
        "en": "a short answer's latency depends on who shared its group",
        "zh-TW": "短回答的延遲，要看誰跟它同一組",
    },
    # 4. dynamic batching
    "7.1.predict.waste": {
        "en": "What share of the decode work will a 0.5 s timeout still throw away?",
        "zh-TW": "超時設為 0.5 s，還會丟掉多少比例的 decode 工作？",
    },
    "7.1.full_groups": {"en": "full groups", "zh-TW": "滿組才出發"},
    "7.1.timeout_name": {"en": "timeout {timeout} s", "zh-TW": "超時 {timeout} s"},
    "7.1.wait_note": {
        "en": "0.5 requests/s; wait = arrival to first computed step, the median over requests",
        "zh-TW": "每秒 0.5 個請求；等待 = 從到達到第一次被計算的那一步，取所有請求的中位數",
    },
    "7.1.table_head": {  # columns of 16, 11, 8 and 19 display columns, one space apart
        "en": "policy           median wait  p99 e2e  wasted decode work",
        "zh-TW": "做法              等待中位數 p99 延遲  浪費的 decode 工作",
    },
    "7.1.timeout_chapter": {
        "en": "the chapter: dynamic batching waits less, yet once decoding starts it keeps the fastest-finisher waste",
        "zh-TW": "書中：動態批次等得比較少，但 decode 一開始，最快完成者造成的浪費一點也沒少",
    },
    "7.1.timeout_engine": {
        "en": "the engine:  median wait {full_wait:.1f} s -> {quick_wait:.1f} s, waste {full_waste:.0%} -> "
              "{quick_waste:.0%}",
        "zh-TW": "引擎：等待中位數 {full_wait:.1f} s -> {quick_wait:.1f} s，浪費 {full_waste:.0%} -> {quick_waste:.0%}",
    },
    "7.1.light_head": {
        "en": "median wait (s) for each timeout {timeouts}",
        "zh-TW": "各超時值下的等待中位數（s），超時依序為 {timeouts}",
    },
    "7.1.light_row": {"en": "  {rate} requests/s: {waits}", "zh-TW": "  每秒 {rate} 個請求：{waits}"},
    "7.1.rate": {"en": "{rate} requests/s", "zh-TW": "每秒 {rate} 個請求"},
    "7.1.x_timeout": {"en": "timeout (s)", "zh-TW": "超時（s）"},
    "7.1.y_wait": {"en": "median wait (s)", "zh-TW": "等待中位數（s）"},
    "7.1.title_wait": {"en": "waiting: the timeout helps at light load", "zh-TW": "等待：負載輕時超時才幫得上忙"},
    "7.1.x_waste": {
        "en": "wasted share of decode work (%), 0.5 requests/s",
        "zh-TW": "decode 工作中浪費的比例（%），每秒 0.5 個請求",
    },
    "7.1.title_waste": {"en": "waste: still there", "zh-TW": "浪費：依然存在"},
}
