"""Notebook 7.0 (why batching): what its code cells print and draw."""

WORDS = {
    # setup
    "7.0.model": {
        "en": "tiny GPT: {params:,} parameters, {layers} layers, width {width},\n"
              "context {context} tokens, byte-level vocabulary of {vocab}",
        "zh-TW": "tiny GPT：{params:,} 個參數，{layers} 層，寬度 {width}，\n"
                 "上下文最長 {context} 個 token，以位元組為單位的詞彙表共 {vocab} 個",
    },
    # 2. measured here
    "7.0.predict.wide": {
        "en": "A 32-wide decode step costs how many times a 1-wide step?",
        "zh-TW": "一次同時 decode 32 個序列的步驟，耗時是只 decode 1 個序列的幾倍？",
    },
    "7.0.measured_row": {
        "en": "B={b:3d}: {ms:6.2f} ms per step = {ratio:5.2f}× a 1-wide step, {per_token:6.3f} ms per token",
        "zh-TW": "B={b:3d}：每步 {ms:6.2f} ms，是 B=1 那一步的 {ratio:5.2f} 倍，每個 token {per_token:6.3f} ms",
    },
    "7.0.x_batch": {"en": "sequences in the step (B)", "zh-TW": "一步裡的序列數（B）"},
    "7.0.y_step_ms": {"en": "ms per decode step", "zh-TW": "每個 decode 步驟（ms）"},
    "7.0.title_step_measured": {"en": "measured here: time per step", "zh-TW": "本機實測：每一步的時間"},
    "7.0.y_token_ms": {"en": "ms per generated token", "zh-TW": "每產出一個 token（ms）"},
    "7.0.title_token_measured": {"en": "measured here: time per token", "zh-TW": "本機實測：每個 token 的時間"},
    # 3. modeled: 70B on an H200
    "7.0.hw_rates": {
        "en": "weights streamed per step: {gb:.1f} GB;  bandwidth {tbs:.2f} TB/s;  arithmetic {tflops:,.0f} TFLOP/s;",
        "zh-TW": "每步串流的權重：{gb:.1f} GB；頻寬 {tbs:.2f} TB/s；算力 {tflops:,.0f} TFLOP/s；",
    },
    "7.0.hw_overhead": {"en": "overhead {ms:.1f} ms per step", "zh-TW": "每步固定開銷 {ms:.1f} ms"},
    "7.0.sources": {
        "en": "sources (all of them, with the assumptions: appendix 7.6):",
        "zh-TW": "資料來源（完整清單與各項假設見附錄 7.6）：",
    },
    "7.0.one_step": {
        "en": "one decode step for a single sequence (512 tokens of context): {ms:.1f} ms",
        "zh-TW": "單一序列的一次 decode 步驟（上下文 512 個 token）：{ms:.1f} ms",
    },
    "7.0.predict.knee": {
        "en": "At what batch size does the modeled step first take twice as long as B=1?",
        "zh-TW": "批次大小到多少時，模型推算的一步第一次變成 B=1 的兩倍長？",
    },
    "7.0.unit.sequences": {"en": "sequences", "zh-TW": "個序列"},
    "7.0.modeled_row": {
        "en": "B={b:3d}: {ms:6.1f} ms per step ({ratio:4.2f}× B=1), {per_token:6.3f} ms per token, {bound}",
        "zh-TW": "B={b:3d}：每步 {ms:6.1f} ms（B=1 的 {ratio:4.2f} 倍），每個 token {per_token:6.3f} ms，{bound}",
    },
    "7.0.bound.memory": {"en": "memory-bound", "zh-TW": "受制於記憶體頻寬"},
    "7.0.bound.compute": {"en": "compute-bound", "zh-TW": "受制於運算"},
    "7.0.chapter_claim": {
        "en": "the chapter: one step can serve many sequences for nearly the price of one",
        "zh-TW": "書中：同一步可以服務許多序列，花費和只服務一個差不多",
    },
    "7.0.engine_claim": {
        "en": "the engine:  64 sequences share one step for {ratio:.2f}× the time of one; "
              "each token costs {cheaper:.0f}× less",
        "zh-TW": "引擎：64 個序列共用一步，耗時是一個序列的 {ratio:.2f} 倍；每個 token 的成本只剩 1/{cheaper:.0f}",
    },
    "7.0.ridge": {
        "en": "ridge: {ms:.1f} ms of weight streaming holds the arithmetic of {tokens:.0f} tokens;\n"
              "       the step is memory-bound up to B={last}, compute-bound from B={knee}",
        "zh-TW": "脊點：串流權重的 {ms:.1f} ms 裡，剛好做得完 {tokens:.0f} 個 token 的運算；\n"
                 "      到 B={last} 為止這一步受制於記憶體頻寬，從 B={knee} 起受制於運算",
    },
    "7.0.doubled": {
        "en": "the step first takes twice as long as B=1 at B={b}",
        "zh-TW": "到了 B={b}，一步的時間第一次達到 B=1 的兩倍",
    },
    "7.0.ridge_label": {"en": "ridge\n{tokens:.0f} tokens", "zh-TW": "脊點\n{tokens:.0f} 個 token"},
    "7.0.y_step_modeled": {"en": "ms per decode step (modeled)", "zh-TW": "每個 decode 步驟（ms，模型推算）"},
    "7.0.title_step_70b": {"en": "70B on H200: time per step", "zh-TW": "H200 上的 70B 模型：每一步的時間"},
    "7.0.legend.reached": {"en": "what a step reaches", "zh-TW": "一步實際達到的"},
    "7.0.legend.memory_roof": {"en": "memory roof (bandwidth)", "zh-TW": "記憶體上限（頻寬）"},
    "7.0.legend.arithmetic_roof": {"en": "arithmetic roof", "zh-TW": "算力上限"},
    "7.0.x_roofline": {
        "en": "tokens in the step (∝ flops per weight byte)",
        "zh-TW": "一步裡的 token 數（∝ 每位元組權重分到的 flops）",
    },
    "7.0.y_roofline": {"en": "useful TFLOP/s (modeled)", "zh-TW": "有用的 TFLOP/s（模型推算）"},
    "7.0.title_roofline": {"en": "the roofline of the linear layers", "zh-TW": "線性層的 roofline"},
    # 4. same answer
    "7.0.identical": {
        "en": "tokens identical alone vs batched: {same}",
        "zh-TW": "單獨跑和整批跑的 token 完全相同：{same}",
    },
    "7.0.shared_steps": {
        "en": "steps shared by the batch: {n} (one prefill step, then 15 decode steps)",
        "zh-TW": "整批共用的步數：{n}（一步 prefill，接著 15 步 decode）",
    },
    # 5. decided every step
    "7.0.step_row": {"en": "step {i:2d} at {ms:6.1f} ms: {what}", "zh-TW": "第 {i:2d} 步，{ms:6.1f} ms 時：{what}"},
}
