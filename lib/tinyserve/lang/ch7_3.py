"""Notebook 7.3 (chunked prefill): what its code cells print and draw.

The tables' rows are numbers formatted in the notebook; their headers here line up with them in display
width (a CJK character takes two columns). The zh-TW policy table puts the name last, so names of any
width leave the columns aligned."""

WORDS = {
    "7.3.setup.inflight": {
        "en": "{n} requests decoding ({tokens} tokens each); "
              "'long' ({prompt:,}-token prompt) arrives at {arrival} s",
        "zh-TW": "{n} 個請求正在 decode（各要 {tokens} 個 token）；'long'（提示詞 {prompt:,} 個 token）"
                 "在 {arrival} s 到達",
    },
    "7.3.setup.step": {
        "en": "a decode step of the thirty takes {ms:.1f} ms (modeled, {hw})",
        "zh-TW": "這三十個序列的一步 decode 要 {ms:.1f} ms（模型推算，{hw}）",
    },
    # the policies, as a learner reads them (the notebook's keys are short ids)
    "7.3.policy.prefill-first": {"en": "prefill-first", "zh-TW": "prefill 優先"},
    "7.3.policy.decode-first": {"en": "decode-first", "zh-TW": "decode 優先"},
    "7.3.policy.forced-20": {"en": "decode-first, forced in after 20 steps",
                             "zh-TW": "decode 優先，等 20 步後強制插入"},
    "7.3.policy.chunked-512": {"en": "chunked, 512-token chunks", "zh-TW": "chunked，每段 512 個 token"},
    # 1. two bad choices
    "7.3.predict.gap": {
        "en": "Worst gap between two tokens of the thirty under prefill-first?",
        "zh-TW": "用 prefill 優先時，這三十個使用者收到的相鄰兩個 token 最長隔多久？",
    },
    "7.3.gaps.head": {
        "en": "policy                                    worst gap  newcomer TTFT",
        "zh-TW": "   最長間隔    新到者 TTFT  策略",
    },
    "7.3.gaps.row": {
        "en": "{name:40s} {gap:8.1f} ms {ttft:11.1f} ms",
        "zh-TW": "{gap:8.1f} ms {ttft:11.1f} ms  {name}",
    },
    "7.3.gaps.chapter": {
        "en": "the chapter: the whole prefill now delays the decodes; holding it back delays the newcomer",
        "zh-TW": "書中：整段 prefill 馬上做，會拖住 decode；把它往後壓，換新到者等",
    },
    "7.3.gaps.engine": {
        "en": "the engine:  prefill-first stalls the thirty for {gap:.0f} ms; "
              "decode-first delays the newcomer {ttft:.1f} s",
        "zh-TW": "引擎：prefill 優先讓這三十個序列卡住 {gap:.0f} ms；decode 優先讓新到者晚了 {ttft:.1f} s",
    },
    # 2. what the steps look like
    "7.3.fig.tokens_per_step": {"en": "{name}: tokens per step", "zh-TW": "{name}：每一步的 token 數"},
    # 3. the ridge
    "7.3.predict.ridge": {
        "en": "Chunk tokens that fit beside thirty decodes before the step gets longer?",
        "zh-TW": "一步變長之前，三十個 decode 旁邊還塞得下幾個 chunk 的 token？",
    },
    "7.3.unit.tokens": {"en": "tokens", "zh-TW": "個 token"},
    "7.3.ridge.stream": {
        "en": "weight stream: {gb:.1f} GB ÷ {tbs:.2f} TB/s = {ms:.1f} ms per step",
        "zh-TW": "權重流：{gb:.1f} GB ÷ {tbs:.2f} TB/s = 每步 {ms:.1f} ms",
    },
    "7.3.ridge.arithmetic": {
        "en": "arithmetic: 2 × {params:.1f}e9 parameters ÷ {tflops:,.0f} TFLOP/s = {ms:.3f} ms per token",
        "zh-TW": "運算：2 × {params:.1f}e9 個參數 ÷ {tflops:,.0f} TFLOP/s = 每個 token {ms:.3f} ms",
    },
    "7.3.ridge.ridge": {
        "en": "ridge: {stream:.1f} ÷ {per_token:.3f} = {ridge:.0f} tokens per step",
        "zh-TW": "脊點（ridge）：{stream:.1f} ÷ {per_token:.3f} = 每步 {ridge:.0f} 個 token",
    },
    "7.3.ridge.fits": {
        "en": "beside {n} decodes, a chunk of up to {fits} tokens rides free",
        "zh-TW": "{n} 個 decode 旁邊，最多 {fits} 個 token 的 chunk 可以免費搭便車",
    },
    "7.3.ridge.head": {
        "en": " chunk  tokens in the worst step  arithmetic past the ridge  worst gap  × a plain step",
        "zh-TW": " chunk       最慢一步的 token 數             超出脊點的運算   最長間隔  為一般步的幾倍",
    },
    "7.3.ridge.plain": {
        "en": "(a plain step of the thirty: {ms:.1f} ms)",
        "zh-TW": "（三十個序列的一般一步：{ms:.1f} ms）",
    },
    "7.3.fig.decodes": {"en": "{n} decodes", "zh-TW": "{n} 個 decode"},
    "7.3.fig.plus_chunk": {"en": "+ {c}-token chunk", "zh-TW": "+ {c} token 的 chunk"},
    "7.3.fig.stream": {"en": "stream the weights once", "zh-TW": "串流一次權重"},
    "7.3.fig.decode_arith": {"en": "decodes' arithmetic", "zh-TW": "decode 的運算"},
    "7.3.fig.chunk_arith": {"en": "chunk's arithmetic", "zh-TW": "chunk 的運算"},
    "7.3.fig.step_ms": {"en": "ms of one step's linear layers (modeled)", "zh-TW": "一步中線性層的 ms（模型推算）"},
    "7.3.fig.one_pass": {"en": "one forward pass, weights streamed once", "zh-TW": "一次前向傳遞，權重只串流一次"},
    "7.3.fig.ridge": {"en": "ridge: {ridge:.0f} tokens", "zh-TW": "脊點：{ridge:.0f} 個 token"},
    "7.3.fig.tokens_in_step": {"en": "tokens in the step", "zh-TW": "這一步的 token 數"},
    "7.3.fig.ms_modeled": {"en": "ms (modeled)", "zh-TW": "ms（模型推算）"},
    "7.3.fig.roofline": {"en": "the roofline as time", "zh-TW": "換算成時間的 roofline"},
    # 4. the chunk length is a knob
    "7.3.predict.chunk": {
        "en": "Which chunk length gives the newcomer its first token soonest: 64, 512 or 4096?",
        "zh-TW": "哪一種 chunk 長度讓新到者最早拿到第一個 token：64、512 還是 4096？",
    },
    "7.3.chunks.head": {
        "en": " chunk  steps with a chunk  worst gap  newcomer TTFT",
        "zh-TW": " chunk     含 chunk 的步數   最長間隔    新到者 TTFT",
    },
    "7.3.chunks.best": {
        "en": "soonest first token with {best}-token chunks",
        "zh-TW": "第一個 token 最早出現：每段 {best} 個 token 的 chunk",
    },
    "7.3.fig.chunked": {"en": "chunked prefill (chunk length)", "zh-TW": "chunked prefill（chunk 長度）"},
    "7.3.fig.held": {"en": "whole prefill, after waiting N steps", "zh-TW": "整段 prefill，先等 N 步"},
    "7.3.fig.plain_step": {"en": "a plain decode step", "zh-TW": "一般的一步 decode"},
    "7.3.fig.newcomer_ttft": {"en": "newcomer's time to first token (ms, modeled)",
                              "zh-TW": "新到者的 TTFT（ms，模型推算）"},
    "7.3.fig.worst_gap": {"en": "the thirty's worst gap (ms, modeled)", "zh-TW": "三十個序列的最長間隔（ms，模型推算）"},
    "7.3.fig.tradeoff": {"en": "the trade-off: lower-left is better", "zh-TW": "取捨：越靠左下越好"},
    # 5. the same schedule on the real model
    "7.3.real.row": {
        "en": "{name}: real model, {steps} steps; same schedule as the dry run: {same}",
        "zh-TW": "{name}：真實模型，{steps} 步；排程與 dry run 相同：{same}",
    },
    # 6. what chunking cannot fix
    "7.3.load.head": {
        "en": "   load  chunk  p99 gap  TTFT p50  TTFT p99  wait for a slot",
        "zh-TW": "   負載  chunk  p99間隔  TTFT p50  TTFT p99     等位子的時間",
    },
}
