"""Notebook 7.2 (continuous batching): what its code cells print and draw."""

WORDS = {
    # predictions
    "7.2.predict.queue": {
        "en": "How many steps after arriving is a queued 20-token request done?",
        "zh-TW": "一個排隊等候、要 20 個 token 的請求，到達後要幾步才完成？",
    },
    "7.2.unit.steps": {"en": "steps", "zh-TW": "步"},
    "7.2.predict.swap": {
        "en": "How many slots change hands in step 20?",
        "zh-TW": "第 20 步有幾個位子換手？",
    },
    "7.2.unit.slots": {"en": "slots", "zh-TW": "個位子"},
    "7.2.predict.util": {
        "en": "Continuous batching's share of decode capacity on this traffic?",
        "zh-TW": "在這份流量上，連續批次能用到 decode 產能的幾成（%）？",
    },
    # 1. the fastest finisher, continuously
    "7.2.finisher.row": {
        "en": "{name:10s}: a queued 20-token request is done {steps} steps after it arrived; "
              "wasted decode tokens: {wasted:,}",
        "zh-TW": "{name:10s}：排隊的 20 token 請求到達後 {steps} 步才完成；浪費的 decode token：{wasted:,}",
    },
    "7.2.finisher.chapter": {
        "en": "the chapter: a 20-token request is done after about 20 iterations, whoever else is in the batch",
        "zh-TW": "書中：要 20 個 token 的請求，大約 20 次迭代就完成，跟批次裡還有誰無關",
    },
    "7.2.finisher.engine": {
        "en": "the engine:  every one is computed in exactly {its} iterations (1 prefill + 19 decodes), "
              "beside r0's 2,000",
        "zh-TW": "引擎：每一個都正好算了 {its} 次迭代（1 次 prefill + 19 次 decode），同批的 r0 則要 2,000 次",
    },
    "7.2.or": {"en": " or ", "zh-TW": " 或 "},
    "7.2.fig.static_waits": {
        "en": "static: the second group waits for r0",
        "zh-TW": "static：第二批請求得等 r0 做完",
    },
    "7.2.fig.cont_refills": {
        "en": "continuous: freed slots are refilled at once",
        "zh-TW": "continuous：空出來的位子馬上有人補上",
    },
    # 2. the moment a slot changes hands
    "7.2.swap.move": {"en": "slot {s}: {a} → {b}", "zh-TW": "位子 {s}：{a} → {b}"},
    "7.2.swap.idle": {"en": "idle", "zh-TW": "閒置"},
    "7.2.swap.sep": {"en": ", ", "zh-TW": "，"},
    "7.2.swap.row": {
        "en": "step {k}: {n} slots change hands ({moves}, …); this step: {prefills} prefills, {decodes} decodes",
        "zh-TW": "第 {k} 步：{n} 個位子換手（{moves}，…）；這一步有 {prefills} 個 prefill、{decodes} 個 decode",
    },
    "7.2.fig.zoom": {
        "en": "zoom on steps 15–25: in step 20 a new request prefills in 31 freed slots",
        "zh-TW": "放大第 15–25 步：第 20 步，空出的 31 個位子各有一個新請求在做 prefill",
    },
    # 3. realistic traffic on a 70B model
    "7.2.longtail.capacity": {
        "en": "{n} requests; decode capacity at 32 slots: {cap:,.0f} tokens/s (modeled: {hw})",
        "zh-TW": "共 {n} 個請求；32 個位子全在 decode 時的產能：{cap:,.0f} token/s（模型推算：{hw}）",
    },
    "7.2.longtail.row": {
        "en": "{name:10s}: slot-time util. {util:5.1%}, share of decode capacity {share:5.1%}, "
              "e2e p50 {p50:4.1f} s, p99 {p99:5.1f} s",
        "zh-TW": "{name:10s}：位子時間利用率 {util:5.1%}，decode 產能占比 {share:5.1%}，"
                 "端到端延遲 p50 {p50:4.1f} s，p99 {p99:5.1f} s",
    },
    "7.2.longtail.chapter": {
        "en": "the chapter: GPU utilisation climbs from 10-20% (static) to 60-80% (continuous); "
              "p99 tightens sharply",
        "zh-TW": "書中：GPU 利用率從 10-20%（static）升到 60-80%（continuous），p99 延遲明顯縮短",
    },
    "7.2.longtail.engine": {
        "en": "the engine:  share of decode capacity {share_s:.0%} -> {share_c:.0%}, "
              "slot-time utilisation {util_s:.0%} -> {util_c:.0%}, p99 {p99_s:.0f} s -> {p99_c:.0f} s",
        "zh-TW": "引擎：decode 產能占比 {share_s:.0%} -> {share_c:.0%}，"
                 "位子時間利用率 {util_s:.0%} -> {util_c:.0%}，p99 {p99_s:.0f} s -> {p99_c:.0f} s",
    },
    "7.2.fig.e2e": {"en": "end-to-end latency (s, modeled)", "zh-TW": "端到端延遲（s，模型推算）"},
    "7.2.fig.done_fraction": {"en": "fraction of requests done", "zh-TW": "已完成請求的比例"},
    "7.2.fig.latency": {"en": "latency of every request", "zh-TW": "每個請求的延遲"},
    "7.2.fig.time": {"en": "time (s, modeled)", "zh-TW": "時間（s，模型推算）"},
    "7.2.fig.useful_slots": {"en": "slots doing useful work", "zh-TW": "做有用工作的位子數"},
    "7.2.fig.useful_per_step": {"en": "useful slots per step", "zh-TW": "每一步的有用位子"},
    # 4. a load knob (the rows under this header are numbers only; columns line up in display width)
    "7.2.sweep.head": {
        "en": "rate    slot-time util.    share of capacity   mean step (ms)   p99 e2e (s)\n"
              "req/s   static / cont.     static / cont.      static / cont.   static / cont.",
        "zh-TW": "到達率  位子時間利用率     產能占比            平均每步 (ms)    p99 端到端 (s)\n"
                 "req/s   static / cont.     static / cont.      static / cont.   static / cont.",
    },
    "7.2.fig.rate": {"en": "arrival rate (requests/s)", "zh-TW": "到達率（請求/s）"},
    "7.2.fig.share": {"en": "share of decode capacity (%)", "zh-TW": "decode 產能占比（%）"},
    "7.2.fig.p99": {"en": "p99 end-to-end (s, modeled)", "zh-TW": "p99 端到端延遲（s，模型推算）"},
    # 5. the same traffic on the real model
    "7.2.real.run": {
        "en": "{n} requests on the real model: {steps} steps, {tokens:,} tokens generated",
        "zh-TW": "在真實模型上跑 {n} 個請求：{steps} 步，共生成 {tokens:,} 個 token",
    },
    "7.2.real.same": {
        "en": "identical schedule in the dry run: {same}",
        "zh-TW": "dry run 的排程與此完全相同：{same}",
    },
}
