"""Notebook 7.4, the bill for Chapter 8 (KV memory): what its code cells print and draw."""

WORDS = {
    "7.4.kv_left": {
        "en": "KV memory left after the weights: {gb:.2f} GB; the server's maximum length (max_model_len): "
              "{n:,} positions",
        "zh-TW": "扣掉權重後留給 KV 的記憶體：{gb:.2f} GB；伺服器的最大長度（max_model_len）：{n:,} 個位置",
    },
    "7.4.per_position": {
        "en": "{n:,} bytes of K and V per position ({units} units, {dtype})",
        "zh-TW": "每個位置的 K 與 V：{n:,} 位元組（{units}的位元組，{dtype}）",
    },
    "7.4.units.modeled": {  # Trace.kv_units, in 7.4.per_position
        "en": "modeled",
        "zh-TW": "成本模型推算",
    },
    "7.4.units.real": {
        "en": "real",
        "zh-TW": "真實模型",
    },
    "7.4.context_kv": {
        "en": "{n:5d} tokens of context: {gb:6.3f} GB of KV",
        "zh-TW": "上下文 {n:5d} 個 token：KV 佔 {gb:6.3f} GB",
    },
    "7.4.predict.used": {
        "en": "Percentage of the reserved KV that holds tokens, over the run?",
        "zh-TW": "整個執行過程中，預留的 KV 平均有百分之幾真的存著 token？",
    },
    "7.4.slots": {
        "en": "{slots} slots x {slab:,} positions ({rule})",
        "zh-TW": "{slots} 個位子 x 每段 slab {slab:,} 個位置（{rule}）",
    },
    "7.4.reserved": {
        "en": "reserved at step 0: {gb:.1f} GB = {slots} x {slab:,} x {bpp:,} bytes; the same at every step",
        "zh-TW": "第 0 步就預留：{gb:.1f} GB = {slots} x {slab:,} x {bpp:,} 位元組；之後每一步都一樣",
    },
    "7.4.peak": {
        "en": "peak used: {gb:.1f} GB",
        "zh-TW": "實際用到的峰值：{gb:.1f} GB",
    },
    "7.4.share": {
        "en": "over the run (time-weighted) the sequences hold {share:.1%} of the reserved KV",
        "zh-TW": "整個執行期間（依時間加權），序列只用到預留 KV 的 {share:.1%}",
    },
    "7.4.fig.reserved": {
        "en": "reserved by the slabs",
        "zh-TW": "slab 預留的",
    },
    "7.4.fig.used": {
        "en": "holding the sequences' tokens",
        "zh-TW": "真的存著序列的 token",
    },
    "7.4.fig.time": {
        "en": "time (s, modeled)",
        "zh-TW": "時間（秒，模型推算）",
    },
    "7.4.fig.kv_gb": {
        "en": "KV memory (GB)",
        "zh-TW": "KV 記憶體（GB）",
    },
    "7.4.fig.title": {
        "en": "continuous batching with one slab per slot",
        "zh-TW": "連續批次，每個位子一段 slab",
    },
    "7.4.predict.fit": {
        "en": "How many sequences fit with one 4,096-position slab each?",
        "zh-TW": "每個序列配一段 4,096 個位置的 slab，KV 記憶體放得下幾個序列？",
    },
    "7.4.unit.sequences": {
        "en": "sequences",
        "zh-TW": "個序列",
    },
    "7.4.one_slab": {
        "en": "one slab = {n:,} positions = {gb:.2f} GB",
        "zh-TW": "一段 slab = {n:,} 個位置 = {gb:.2f} GB",
    },
    "7.4.mean_seq": {
        "en": "mean sequence of this traffic: {n:.0f} tokens = {gb:.3f} GB",
        "zh-TW": "這批流量的平均序列：{n:.0f} 個 token = {gb:.3f} GB",
    },
    "7.4.chapter": {
        "en": "the chapter: the naive one-slab-per-slot layout gives back much of the batching win",
        "zh-TW": "書中的主張：每個位子各配一段 slab 的簡單做法，會讓批次處理賺到的好處流失一大半",
    },
    "7.4.engine": {
        "en": "the engine:  slabs fit {slabs} sequences; allocating exactly what each uses would fit {exact} "
              "({gain:.1f}x as many)",
        "zh-TW": "引擎的結果：slab 只放得下 {slabs} 個序列；若每個序列只分配實際用到的量，可以放 {exact} 個"
                 "（{gain:.1f} 倍）",
    },
    "7.4.bar.slabs": {
        "en": "one slab per sequence",
        "zh-TW": "每個序列一段 slab",
    },
    "7.4.bar.exact": {
        "en": "exactly what each uses",
        "zh-TW": "只分配實際用量",
    },
    "7.4.bar.xlabel": {
        "en": "sequences that fit in the KV memory",
        "zh-TW": "KV 記憶體放得下的序列數",
    },
    "7.4.bar.title": {
        "en": "70B on one H200: concurrency left on the table",
        "zh-TW": "一張 H200 跑 70B：白白放掉的並行度",
    },
    "7.4.predict.pages": {
        "en": "At 16 requests/s, at most how many sequences will the pages run at once?",
        "zh-TW": "到達率 16 req/s 時，改用區塊與 page table，最多能同時跑幾個序列？",
    },
    "7.4.cmp.head": {
        "en": " rate   layout most seqs   output   TTFT p99   e2e p99  KV held / used   preempted\n"
              "req/s          in a step    tok/s        (s)       (s)       peak (GB)",
        "zh-TW": "到達率  佈局    單步最多     輸出   TTFT p99    端到端  KV 佔用 / 實用    搶占次數\n"
                 "req/s             序列數    tok/s        (s)   p99 (s)       峰值 (GB)",
    },
    "7.4.cmp.row": {
        "en": "{rate:5.1f}   {layout:6s} {peak:9d}   {tok_s:6.0f}   {ttft_p99:8.2f}   {e2e_p99:7.1f}   "
              "{held_gb:6.1f} / {used_gb:4.1f}   {preemptions:9d}",
        "zh-TW": "{rate:5.1f}   {layout:6s} {peak:9d}   {tok_s:6.0f}   {ttft_p99:8.2f}   {e2e_p99:7.1f}   "
                 "{held_gb:6.1f} / {used_gb:4.1f}   {preemptions:9d}",
    },
    "7.4.cmp.engine": {
        "en": "the engine: at 16 req/s pages ran up to {pages} sequences in one step where slabs stopped at {slabs} "
              "(exact allocation's estimate above: {fit}); {gain:.2f}x the output tokens/s; TTFT p99 "
              "{ttft_s:.1f} s -> {ttft_p:.2f} s",
        "zh-TW": "引擎的結果：16 req/s 時，slab 最多同時跑 {slabs} 個序列，改用區塊後單步最多跑到 {pages} 個"
                 "（前面精確分配的估計：{fit} 個）；每秒輸出的 token 是 {gain:.2f} 倍；TTFT p99 從 {ttft_s:.1f} s "
                 "降到 {ttft_p:.2f} s",
    },
    "7.4.cmp.fig.running": {
        "en": "sequences in the step",
        "zh-TW": "這一步的序列數",
    },
    "7.4.cmp.fig.running_title": {
        "en": "sequences computed per step, 16 req/s",
        "zh-TW": "每一步計算的序列數（16 req/s）",
    },
    "7.4.cmp.fig.waiting": {
        "en": "requests waiting",
        "zh-TW": "等待中的請求",
    },
    "7.4.cmp.fig.waiting_title": {
        "en": "the queue for a place in the batch",
        "zh-TW": "排隊等著進批次的佇列",
    },
    "7.4.preempt": {
        "en": "pages: {n} preemptions; {tokens:,} positions computed again ({share:.1%} of all prefill tokens); "
              "{peak:,} of the pool's {blocks:,} blocks held at the peak",
        "zh-TW": "區塊：搶占 {n} 次；重算了 {tokens:,} 個位置（占全部 prefill token 的 {share:.1%}）；"
                 "最忙時占用了區塊池 {blocks:,} 個區塊中的 {peak:,} 個",
    },
    "7.4.blocks.fig.filled": {
        "en": "filled with tokens",
        "zh-TW": "存著 token 的部分",
    },
    "7.4.blocks.fig.waste": {
        "en": "internal waste (tails of last blocks)",
        "zh-TW": "內部浪費（最後一個區塊沒填滿的尾巴）",
    },
    "7.4.blocks.fig.free": {
        "en": "free blocks",
        "zh-TW": "空閒的區塊",
    },
    "7.4.blocks.fig.preempted": {
        "en": "a preemption",
        "zh-TW": "一次搶占",
    },
    "7.4.blocks.fig.step": {
        "en": "step",
        "zh-TW": "步",
    },
    "7.4.blocks.fig.blocks": {
        "en": "blocks",
        "zh-TW": "區塊數",
    },
    "7.4.blocks.fig.title": {
        "en": "the block pool: 600 requests at 16 req/s",
        "zh-TW": "區塊池：600 個請求，16 req/s",
    },
    "7.4.bsize.head": {
        "en": "block   table entries   blocks held   internal waste    waste at   most seqs\n"
              " size    per sequence       at peak     (share held)   peak (GB)   in a step",
        "zh-TW": " 區塊      每個序列的      峰值占用         內部浪費    峰值浪費    單步最多\n"
                 " 大小      表格項目數        區塊數   （占用的比例）        (GB)      序列數",
    },
    "7.4.bsize.row": {
        "en": "{size:5d}   {entries:13.1f}   {peak:11,d}   {share:14.2%}   {gb:9.2f}   {seqs:9d}",
        "zh-TW": "{size:5d}   {entries:13.1f}   {peak:11,d}   {share:14.2%}   {gb:9.2f}   {seqs:9d}",
    },
}
