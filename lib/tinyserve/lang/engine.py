"""What the engine says to a learner: knob errors, rejected requests, slab rules, the presets' texts, tables.

The English is the engine's own text, byte for byte (the CLI and the tests read it; the CLI never sets a
language). A preset's texts are keyed by its name and field ("engine.preset.NAME.description",
".sources.I", ".details.KEY"); HardwarePreset.text shows a translation only while its English still matches
the preset's JSON, so an edited preset falls back to its own words instead of a stale translation.
"""

WORDS = {
    # ---- RunConfig and the other run knobs (core/config.py, loop.py) ----
    "engine.knob.integer": {
        "en": "{name}: must be an integer >= {lo}, got {value!r}",
        "zh-TW": "{name}：必須是 >= {lo} 的整數，收到的是 {value!r}",
    },
    "engine.knob.at_least": {
        "en": "{name}: must be >= {lo}, got {value}",
        "zh-TW": "{name}：必須 >= {lo}，收到的是 {value}",
    },
    "engine.knob.timeout": {
        "en": "timeout: must be a finite number of seconds >= 0, got {value!r}",
        "zh-TW": "timeout：必須是 >= 0 的有限秒數，收到的是 {value!r}",
    },
    "engine.knob.prefill_first": {
        "en": "prefill_first: must be True or False, got {value!r}",
        "zh-TW": "prefill_first：必須是 True 或 False，收到的是 {value!r}",
    },
    "engine.knob.max_waiting_steps": {
        "en": "max_waiting_steps: must be an integer >= 0 (0 = prefill-first) or math.inf (unbounded), got {value!r}",
        "zh-TW": "max_waiting_steps：必須是 >= 0 的整數（0 = prefill 優先）或 math.inf（不設上限），收到的是 {value!r}",
    },
    "engine.knob.token_budget": {
        "en": "max_batch_tokens: must be >= batch_size ({batch_size}) so that no decode is ever skipped, "
              "got {max_batch_tokens}",
        "zh-TW": "max_batch_tokens：必須 >= batch_size（{batch_size}），才不會有 decode 被跳過；"
                 "收到的是 {max_batch_tokens}",
    },
    "engine.knob.policy_object": {
        "en": "policy: knobs apply to a policy given by name (set them on the policy object)",
        "zh-TW": "policy：這些參數只能搭配以名稱指定的 policy（請直接設定在 policy 物件上）",
    },
    "engine.knob.policy_unknown": {
        "en": "policy: unknown {policy!r} (choose {choices})",
        "zh-TW": "policy：沒有 {policy!r} 這個選項（可選 {choices}）",
    },
    "engine.knob.not_for_policy": {
        "en": "{knob}: does not apply to the {policy} policy (only to {users})",
        "zh-TW": "{knob}：不適用於 {policy} policy（只適用於 {users}）",
    },
    "engine.and": {  # joins the names of a list: "static and dynamic"
        "en": " and ",
        "zh-TW": "、",
    },
    "engine.knob.kv_budget": {
        "en": "kv_budget: must be a positive integer number of bytes, got {value!r}",
        "zh-TW": "kv_budget：必須是正整數（位元組數），收到的是 {value!r}",
    },
    "engine.knob.hardware_wall": {
        "en": "hardware: applies to the modeled clock only (drop --hardware or use --clock modeled)",
        "zh-TW": "hardware：只適用於模型推算的時鐘（拿掉 --hardware，或改用 --clock modeled）",
    },
    "engine.knob.clock": {
        "en": "clock: unknown {clock!r} (choose modeled, wall)",
        "zh-TW": "clock：沒有 {clock!r} 這個選項（可選 modeled、wall）",
    },
    "engine.knob.dry_run": {
        "en": "dry_run: needs the modeled clock (a wall clock has nothing to measure)",
        "zh-TW": "dry_run：需要模型推算的時鐘（dry run 不跑模型，本機時鐘沒有東西可量）",
    },
    "engine.knob.seed": {
        "en": "seed: must be an integer, got {value!r}",
        "zh-TW": "seed：必須是整數，收到的是 {value!r}",
    },
    "engine.knob.slab": {
        "en": "slab: must be one of {choices}, got {value!r}",
        "zh-TW": "slab：必須是 {choices} 其中之一，收到的是 {value!r}",
    },
    "engine.knob.workload_knobs": {
        "en": "workload_knobs: must be a dict of knob -> value, got {value!r}",
        "zh-TW": "workload_knobs：必須是「參數名稱 -> 值」的 dict，收到的是 {value!r}",
    },
    "engine.knob.workload_knobs_named": {
        "en": "workload_knobs: apply to a named workload only, not to {what} (got {knobs})",
        "zh-TW": "workload_knobs：只適用於有名稱的工作負載，不適用於{what}（收到 {knobs}）",
    },
    "engine.workload.a_list": {
        "en": "a list of requests",
        "zh-TW": "一串請求",
    },
    "engine.workload.a_jsonl": {
        "en": "a JSONL file",
        "zh-TW": " JSONL 檔案",
    },
    "engine.workload.unknown": {
        "en": "workload: unknown {name!r} (choose {choices}, or FILE.jsonl)",
        "zh-TW": "workload：沒有 {name!r} 這個工作負載（可選 {choices}，或一個 FILE.jsonl）",
    },
    "engine.workload.unknown_knob": {
        "en": "workload {name}: unknown knob {knob!r} (knobs: {knobs})",
        "zh-TW": "workload {name}：沒有 {knob!r} 這個參數（可用的參數：{knobs}）",
    },
    "engine.workload.none": {
        "en": "none",
        "zh-TW": "無",
    },
    "engine.workload.jsonl_knobs": {
        "en": "workload {name}: a JSONL file takes no knobs (got {knobs})",
        "zh-TW": "workload {name}：JSONL 檔案不接受參數（收到 {knobs}）",
    },
    "engine.workload.knob_value": {
        "en": "workload {workload}: {knob} must be {rng}, got {value}",
        "zh-TW": "workload {workload}：{knob} 必須是{rng}，收到的是 {value}",
    },
    "engine.workload.int_range": {
        "en": "an integer in {lo}..{hi}",
        "zh-TW": " {lo}..{hi} 之間的整數",
    },
    "engine.workload.float_range": {
        "en": "a finite number {op} {lo:g}",
        "zh-TW": " {op} {lo:g} 的有限數字",
    },
    "engine.preset.unknown": {
        "en": "hardware: unknown {name!r} (choose {choices}, or a FILE.json from tinyserve calibrate)",
        "zh-TW": "hardware：沒有 {name!r} 這個 preset（可選 {choices}，或 tinyserve calibrate 寫出的 FILE.json）",
    },
    "engine.knob.max_model_len": {
        "en": "max_model_len: must be an integer in 1..{limit}, got {value!r}",
        "zh-TW": "max_model_len：必須是 1..{limit} 之間的整數，收到的是 {value!r}",
    },

    # ---- requests a run cannot take (core/request.py) ----
    "engine.request.duplicate": {
        "en": "requests: duplicate id {id!r}",
        "zh-TW": "requests：id {id!r} 重複了",
    },
    "engine.request.arrival": {
        "en": "arrival_s: request {id!r} must be a finite number >= 0, got {value!r}",
        "zh-TW": "arrival_s：請求 {id!r} 的值必須是 >= 0 的有限數字，收到的是 {value!r}",
    },
    "engine.request.token_ids": {
        "en": "prompt: request {id!r} must hold integer token ids in 0..{top}",
        "zh-TW": "prompt：請求 {id!r} 的提示詞只能是 0..{top} 之間的整數 token id",
    },
    "engine.request.max_new_tokens": {
        "en": "max_new_tokens: request {id!r} must be an integer >= 1, got {value!r}",
        "zh-TW": "max_new_tokens：請求 {id!r} 的值必須是 >= 1 的整數，收到的是 {value!r}",
    },
    "engine.request.hint": {
        "en": "output_len_hint: request {id!r} must be an integer in 1..max_new_tokens or None, got {value!r}",
        "zh-TW": "output_len_hint：請求 {id!r} 的值必須是 1..max_new_tokens 之間的整數或 None，收到的是 {value!r}",
    },
    "engine.request.dry_run_length": {
        "en": "dry_run: request {id!r} has no known output length (set ignore_eos, or output_len_hint from an "
              "earlier real run)",
        "zh-TW": "dry_run：請求 {id!r} 的輸出長度未知（請設定 ignore_eos，或從先前一次真實執行取得 output_len_hint）",
    },
    "engine.request.unknown_id": {
        "en": "request_id: unknown {id!r}",
        "zh-TW": "request_id：找不到 {id!r}",
    },
    "engine.request.already_done": {
        "en": "request_id: {id!r} is already {status}",
        "zh-TW": "request_id：{id!r} 已經是 {status} 狀態",
    },
    "engine.reject.empty": {
        "en": "empty prompt",
        "zh-TW": "提示詞是空的",
    },
    "engine.reject.max_new_tokens": {
        "en": "max_new_tokens must be >= 1, got {value}",
        "zh-TW": "max_new_tokens 必須 >= 1，收到的是 {value}",
    },
    "engine.reject.too_long.context": {
        "en": "prompt {prompt} tokens + max_new_tokens {new} exceeds the context of {limit}",
        "zh-TW": "提示詞 {prompt} 個 token 加上 max_new_tokens {new}，超過模型的上下文長度 {limit}",
    },
    "engine.reject.too_long.max_model_len": {
        "en": "prompt {prompt} tokens + max_new_tokens {new} exceeds max_model_len of {limit}",
        "zh-TW": "提示詞 {prompt} 個 token 加上 max_new_tokens {new}，超過 max_model_len {limit}",
    },
    "engine.reject.hint": {
        "en": "output_len_hint {hint} must be in 1..max_new_tokens ({max_new})",
        "zh-TW": "output_len_hint {hint} 必須在 1..max_new_tokens（{max_new}）之間",
    },
    "engine.reject.kv": {
        "en": "needs {need:,} bytes of KV ({tokens} positions x {bytes_per_token:,} bytes), more than the "
              "{capacity_name} of {capacity:,} bytes",
        "zh-TW": "需要 {need:,} 位元組的 KV（{tokens} 個位置 x {bytes_per_token:,} 位元組），"
                 "超過 {capacity_name}的 {capacity:,} 位元組",
    },
    "engine.kv.memory_of": {  # a capacity's name in engine.reject.kv
        "en": "{name} KV memory",
        "zh-TW": "{name} 的 KV 記憶體",
    },
    "engine.length.empty": {
        "en": "prompt: empty (needs at least 1 token)",
        "zh-TW": "prompt：提示詞是空的（至少要 1 個 token）",
    },
    "engine.length.max_new_tokens": {
        "en": "max_new_tokens: must be >= 1, got {value}",
        "zh-TW": "max_new_tokens：必須 >= 1，收到的是 {value}",
    },
    "engine.length.too_long": {
        "en": "prompt: {prompt} tokens + max_new_tokens {new} exceeds the context of {limit}",
        "zh-TW": "prompt：提示詞 {prompt} 個 token 加上 max_new_tokens {new}，超過模型的上下文長度 {limit}",
    },

    # ---- KV memory (core/kv.py): what sized the slab (Trace.slab_rule) and sequences_that_fit ----
    "engine.slab.longest": {
        "en": "longest: the run's longest request (a what-if: no server knows it in advance)",
        "zh-TW": "longest：本次執行最長的請求（假設情境：沒有伺服器能事先知道）",
    },
    "engine.slab.given": {
        "en": "max_model_len: given to the run",
        "zh-TW": "max_model_len：執行時指定",
    },
    "engine.slab.preset": {
        "en": "max_model_len: the preset {name}'s",
        "zh-TW": "max_model_len：preset {name} 的設定",
    },
    "engine.slab.context": {
        "en": "max_model_len: the model's context",
        "zh-TW": "max_model_len：模型的上下文長度",
    },
    "engine.slab.real": {
        "en": "longest: the real model's tensors, sized to the run's longest request",
        "zh-TW": "longest：真實模型的張量，大小依本次執行最長的請求而定",
    },
    "engine.fit.no_memory": {
        "en": "hardware: {name} states no KV memory (kv_memory_bytes)",
        "zh-TW": "hardware：{name} 沒有註明 KV 記憶體（kv_memory_bytes）",
    },
    "engine.fit.lengths": {
        "en": "lengths: must be a non-empty list of integers >= 1",
        "zh-TW": "lengths：必須是非空的 list，內容是 >= 1 的整數",
    },
    "engine.fit.max_len": {
        "en": "max_len: must be an integer >= the longest length {longest}, got {value!r}",
        "zh-TW": "max_len：必須是整數，且 >= 最長的長度 {longest}，收到的是 {value!r}",
    },

    # ---- the cost model's validation table (tools/validate.py format_table), read in 7.6 ----
    "engine.validation.header": {
        "en": "| workload | policy | steps | measured total (s) | modeled total (s) | error | per-step median error "
              "| wall total (s) |",
        "zh-TW": "| 工作負載 | policy | 步數 | 實測總時間（s） | 模型推算總時間（s） | 誤差 | 每步誤差的中位數 "
                 "| 整段執行的本機時鐘時間（s） |",
    },

    # ---- the shipped presets' texts (lib/tinyserve/presets/*.json), read in 7.4 and 7.6 ----
    "engine.preset.4xh100-70b-bf16.description": {
        "en": "Llama-3-70B-class model, bf16 weights and KV cache, tensor-parallel over 4 NVIDIA H100 SXM (80 GB each)",
        "zh-TW": "Llama-3-70B 級模型，權重與 KV 快取都是 bf16，以張量平行分散在 4 張 NVIDIA H100 SXM 上（每張 80 GB）",
    },
    "engine.preset.cpu-tiny.description": {
        "en": "the tiny GPT (1,350,656 params, float32) run by tinyserve's forward_step on AMD EPYC",
        "zh-TW": "tiny GPT（1,350,656 個參數，float32），由 tinyserve 的 forward_step 在 AMD EPYC 上執行",
    },
    "engine.preset.h200-70b-fp8.description": {
        "en": "Llama-3-70B-class model, FP8 weights, bf16 KV cache, on one NVIDIA H200 SXM (141 GB HBM3e)",
        "zh-TW": "Llama-3-70B 級模型，FP8 權重、bf16 KV 快取，跑在一張 NVIDIA H200 SXM（141 GB HBM3e）上",
    },
    "engine.preset.h200-70b-fp8.sources.0": {
        "en": "NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/ : H200 SXM 141 GB "
              "HBM3e, 4.8 TB/s; FP8 Tensor Core 3,958 TFLOPS and BF16 1,979 TFLOPS, both with sparsity = 1,979 and "
              "989.5 TFLOPS dense",
        "zh-TW": "NVIDIA H200 Tensor Core GPU 規格書，https://www.nvidia.com/en-us/data-center/h200/ ：H200 SXM "
                 "141 GB HBM3e，4.8 TB/s；FP8 Tensor Core 3,958 TFLOPS、BF16 1,979 TFLOPS，兩者都是含稀疏性的"
                 "數字，換算成稠密運算分別是 1,979 與 989.5 TFLOPS",
    },
    "engine.preset.h200-70b-fp8.sources.1": {
        "en": "Model shape: Meta Llama 3 70B config.json, "
              "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json (hidden_size 8192, "
              "num_hidden_layers 80, num_attention_heads 64, num_key_value_heads 8, intermediate_size 28672, "
              "vocab_size 128256) -> 70.55e9 parameters, 68.45e9 in the blocks",
        "zh-TW": "模型形狀：Meta Llama 3 70B 的 config.json，"
                 "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json（hidden_size 8192、"
                 "num_hidden_layers 80、num_attention_heads 64、num_key_value_heads 8、intermediate_size 28672、"
                 "vocab_size 128256）-> 共 70.55e9 個參數，其中 68.45e9 在 Transformer 各層裡",
    },
    "engine.preset.h200-70b-fp8.sources.2": {
        "en": "Weights streamed per step: blocks in FP8 (68.45 GB) + output head kept in bf16 (2.10 GB), as FP8 "
              "checkpoints usually do (e.g. https://huggingface.co/neuralmagic/Meta-Llama-3-70B-Instruct-FP8 "
              "quantizes the linear layers, not lm_head) = 70.55 GB; the input embedding is gathered, not streamed",
        "zh-TW": "每一步串流的權重：FP8 的 Transformer 各層（68.45 GB）+ 保留 bf16 的輸出層（2.10 GB），FP8 "
                 "checkpoint 通常就是這樣做（例如 https://huggingface.co/neuralmagic/Meta-Llama-3-70B-Instruct-FP8 "
                 "只量化線性層，不量化 lm_head）= 70.55 GB；輸入 embedding 只按 token 取出對應的列，不必整份串流",
    },
    "engine.preset.h200-70b-fp8.sources.3": {
        "en": "Bandwidth efficiency 80% of 4.8 TB/s = 3.84 TB/s (our assumption, stated): weight streaming and decode "
              "attention are long sequential reads, which well-tuned kernels run at ~80-90% of HBM peak",
        "zh-TW": "頻寬效率取 4.8 TB/s 的 80% = 3.84 TB/s（我們的假設，在此明說）：權重流與 decode 的 attention "
                 "都是長段的循序讀取，調校良好的 kernel 可以跑到 HBM 峰值的 ~80-90%",
    },
    "engine.preset.h200-70b-fp8.sources.4": {
        "en": "Linear-layer efficiency 60% of dense FP8 peak = 1,187 TFLOPS (our assumption, stated): large FP8 GEMMs "
              "reach ~65-75% of dense peak; a step's GEMMs also include narrow ones (QKV, output projection) and the "
              "norms, activations and FP8 scaling do no tensor-core work",
        "zh-TW": "線性層效率取 FP8 稠密峰值的 60% = 1,187 TFLOPS（我們的假設，在此明說）：大型 FP8 GEMM 可達"
                 "稠密峰值的 ~65-75%；但一步裡也有較窄的 GEMM（QKV、輸出投影），而 norm、激活函數與 FP8 縮放"
                 "都用不到 tensor core",
    },
    "engine.preset.h200-70b-fp8.sources.5": {
        "en": "Attention efficiency 60% of dense BF16 peak = 594 TFLOPS (our assumption, stated): attention runs in "
              "bf16 (the KV cache is bf16); FlashAttention-3 (https://arxiv.org/abs/2407.08608) reports up to "
              "740 TFLOPS (75%) for BF16 forward on H100, less with a causal mask and at short lengths; H200 has "
              "H100's compute",
        "zh-TW": "Attention 效率取 BF16 稠密峰值的 60% = 594 TFLOPS（我們的假設，在此明說）：attention 以 bf16 "
                 "計算（KV 快取是 bf16）；FlashAttention-3（https://arxiv.org/abs/2407.08608）回報 H100 上 BF16 "
                 "前向最高 740 TFLOPS（75%），加上因果遮罩或序列較短時還會更低；H200 的算力與 H100 相同",
    },
    "engine.preset.h200-70b-fp8.sources.6": {
        "en": "Overhead 2 ms per step (our assumption, stated): scheduling, input preparation, sampling and launch "
              "gaps that CUDA graphs do not hide; vLLM's v0.6.0 performance post "
              "(https://blog.vllm.ai/2024/09/05/perf-update.html) found CPU-side work (API server, scheduling) to be "
              "most of a step for Llama-3-8B on H100 before multi-step scheduling and async output processing hid it",
        "zh-TW": "每步固定開銷 2 ms（我們的假設，在此明說）：排程、準備輸入、取樣，以及 CUDA graph 藏不住的"
                 " kernel 啟動空檔；vLLM v0.6.0 的效能文章（https://blog.vllm.ai/2024/09/05/perf-update.html）"
                 "發現，在多步排程與非同步輸出處理把它藏起來之前，H100 上 Llama-3-8B 的一步大半花在 CPU 端的工作"
                 "（API 伺服器、排程）",
    },
    "engine.preset.h200-70b-fp8.sources.7": {
        "en": "Attention calls: 'paged' = one batched kernel per layer for every sequence of the step (FlashAttention "
              "varlen / FlashInfer), so no cost per call (call_overhead_s 0) beyond the step's overhead; each decode "
              "reads exactly its own keys",
        "zh-TW": "Attention 呼叫：'paged' = 每層用一個批次 kernel 處理這一步的所有序列（FlashAttention varlen / "
                 "FlashInfer），所以除了每步的固定開銷，每次呼叫沒有額外成本（call_overhead_s 0）；每個 decode "
                 "只讀它自己的 key",
    },
    "engine.preset.h200-70b-fp8.details.kv_memory": {
        "en": "KV memory (our derivation, stated): 141e9 bytes (datasheet) x 0.90 (vLLM's default "
              "gpu_memory_utilization) = 126.9e9, less the resident weights 72.65e9 (blocks in FP8 68.45e9 + output "
              "head 2.10e9 + input embedding 2.10e9, both bf16), less ~3e9 assumed for activations, CUDA graphs and "
              "workspace = 51.25e9 bytes = 156,402 tokens of bf16 KV at 327,680 bytes per token",
        "zh-TW": "KV 記憶體（我們的推導，在此明說）：141e9 位元組（規格書）x 0.90（vLLM 預設的 "
                 "gpu_memory_utilization）= 126.9e9，扣掉常駐的權重 72.65e9（FP8 的 Transformer 各層 68.45e9 + "
                 "輸出層 2.10e9 + 輸入 embedding 2.10e9，後兩者是 bf16），再扣掉假設給激活值、CUDA graph 與"
                 "工作區的 ~3e9 = 51.25e9 位元組 = 156,402 個 token 的 bf16 KV（每個 token 327,680 位元組）",
    },
    # the paged KV layout (core/config.py, core/blocks.py)
    "engine.kv.layout": {"en": "kv_layout: unknown {layout!r} (choose {choices})",
                         "zh-TW": "kv_layout：沒有 {layout!r} 這種佈局（可選 {choices}）"},
    "engine.kv.block_size_slab": {"en": "block_size: applies to the paged layout only (add --kv-layout paged)",
                                  "zh-TW": "block_size：只適用於 paged 佈局（請加上 --kv-layout paged）"},
    "engine.kv.pool_small": {"en": "{knob}: a pool of {blocks} blocks x {size} positions ({name}) cannot hold even "
                                   "the shortest prompt ({shortest} positions); give a larger --kv-budget or a "
                                   "smaller --block-size",
                             "zh-TW": "{knob}：{blocks} 個區塊、每塊 {size} 個位置的區塊池（{name}）連最短的提示詞"
                                      "（{shortest} 個位置）都放不下；請給更大的 --kv-budget 或更小的 --block-size"},
    "engine.kv.equal_memory": {"en": "slab layout's equal memory", "zh-TW": "與 slab 佈局相同的記憶體"},
    "engine.kv.too_many_blocks": {"en": "needs {need} KV blocks of {size} positions ({positions} positions), more "
                                        "than the pool's {blocks} ({name})",
                                  "zh-TW": "需要 {need} 個 KV 區塊（每塊 {size} 個位置，共 {positions} 個位置），"
                                           "超過區塊池的 {blocks} 個（{name}）"},
}

