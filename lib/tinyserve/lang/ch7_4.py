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
    "7.4.paged": {
        "en": "with {block}-position blocks this traffic's sequences reserve {paged:,} positions for {tokens:,} tokens:",
        "zh-TW": "改用每塊 {block} 個位置的區塊，這批流量的序列為 {tokens:,} 個 token 預留 {paged:,} 個位置：",
    },
    "7.4.unused": {
        "en": "{unused:.1%} of the reservation unused (with {slab:,}-position slabs: {slab_unused:.1%})",
        "zh-TW": "預留的位置有 {unused:.1%} 沒用到（若用 {slab:,} 個位置的 slab：{slab_unused:.1%}）",
    },
}
