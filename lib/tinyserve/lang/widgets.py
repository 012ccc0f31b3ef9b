"""Words of the widgets (tinyserve_widgets): figure labels, hover text, sentences, knobs, the Predict box.

The unprefixed keys (axis., title., phase., ...) are the widgets' own, as they were in tinyserve_widgets/words.py;
keys added since carry a "widgets." or "sweep_plots." prefix. "hover.*" values with plotly's %{...} syntax are
templates for plotly: call t() on them without fields.
"""
from __future__ import annotations

WORDS: dict[str, dict[str, str]] = {
    # phases of a slot in a step (GRID_PHASES order: idle, prefill, padding, decode, wasted)
    "phase.idle": {"en": "idle", "zh-TW": "閒置"},
    "phase.prefill": {"en": "prefill", "zh-TW": "prefill"},
    "phase.padding": {"en": "padding", "zh-TW": "padding"},
    "phase.decode": {"en": "useful decode", "zh-TW": "有用的 decode"},
    "phase.wasted": {"en": "wasted decode", "zh-TW": "浪費的 decode"},
    # waste meter categories (Trace.slot_steps keys)
    "waste.useful": {"en": "useful", "zh-TW": "有用"},
    "waste.padding": {"en": "padding", "zh-TW": "padding"},
    "waste.wasted": {"en": "wasted", "zh-TW": "浪費"},
    "waste.idle": {"en": "idle", "zh-TW": "閒置"},
    # axes and titles
    "axis.step": {"en": "step", "zh-TW": "步"},
    "axis.slot": {"en": "slot", "zh-TW": "位子"},
    "axis.time.modeled": {"en": "time (s, modeled: {hardware})", "zh-TW": "時間（s，模型推算：{hardware}）"},
    "axis.time.wall": {"en": "time (s, measured on this machine)", "zh-TW": "時間（s，實測：本機時鐘）"},
    "axis.slot_steps": {"en": "slot-steps so far", "zh-TW": "到目前為止的位子步"},
    "axis.tokens": {"en": "tokens in the step", "zh-TW": "這一步的 token 數"},
    "axis.gap_ms": {"en": "ms", "zh-TW": "ms"},
    "axis.kv": {"en": "KV cache ({unit})", "zh-TW": "KV 快取（{unit}）"},
    "axis.latency_ms": {"en": "latency (ms)", "zh-TW": "延遲（ms）"},
    "axis.fraction": {"en": "fraction of requests", "zh-TW": "請求的比例"},
    "axis.request": {"en": "request", "zh-TW": "請求"},
    "title.timeline": {"en": "Slots × steps — {policy}, {workload}", "zh-TW": "位子 × 步 — {policy}，{workload}"},
    "title.waste": {"en": "Where the slot-steps went (up to step {k})",
                    "zh-TW": "位子步的去向（至第 {k} 步）"},
    "title.composition": {"en": "What each step computed", "zh-TW": "每一步算了什麼"},
    "title.step_tokens": {"en": "Step {k}: tokens by request", "zh-TW": "第 {k} 步：每個請求的 token"},
    "title.gaps": {"en": "Waiting between tokens", "zh-TW": "兩個 token 之間的等待"},
    "title.kv": {"en": "KV cache: reserved vs used", "zh-TW": "KV 快取：預留的與實際用到的"},
    "title.kv.paged": {"en": "KV cache: held in blocks vs used", "zh-TW": "KV 快取：區塊持有的與實際用到的"},
    "title.latency": {"en": "Latency distributions", "zh-TW": "延遲的分布"},
    "title.requests": {"en": "Requests: waiting, prefill, decode, done",
                       "zh-TW": "請求：等待、prefill、decode、完成"},
    # notes on figures
    "note.binned": {"en": "{steps} steps drawn as {cols} columns of {bin} steps (most frequent phase per column)",
                    "zh-TW": "{steps} 步畫成 {cols} 欄，每欄 {bin} 步（每欄畫出最常出現的階段）"},
    "note.requests_cut": {"en": "first {shown} of {total} requests shown",
                          "zh-TW": "只畫出 {total} 個請求中的前 {shown} 個"},
    "note.no_steps": {"en": "this trace has no steps (e.g. a replay against a real server): only latencies can be drawn",
                      "zh-TW": "這份 trace 沒有步驟（例如對真實伺服器重播的結果），只能畫出延遲"},
    "note.budget": {"en": "token budget {budget}", "zh-TW": "token 預算 {budget}"},
    # cursor
    "cursor.label": {"en": "step {k} of {n} · t = {t:.3f} s", "zh-TW": "第 {k} / {n} 步 · t = {t:.3f} s"},
    "cursor.empty": {"en": "no steps", "zh-TW": "沒有步驟"},
    "cursor.play": {"en": "Play", "zh-TW": "播放"},
    # waste meter sentences
    "waste.sentence.wasted": {"en": "{wasted} of {slots} slots are computing tokens nobody will read.",
                              "zh-TW": "{slots} 個位子裡有 {wasted} 個在算沒有人會讀的 token。"},
    "waste.sentence.idle": {"en": "{idle} of {slots} slots sit idle.",
                            "zh-TW": "{slots} 個位子裡有 {idle} 個閒置。"},
    "waste.sentence.padding": {"en": "{padding} of {slots} slots are mostly computing padding.",
                               "zh-TW": "{slots} 個位子裡有 {padding} 個大部分在算 padding。"},
    "waste.sentence.full": {"en": "All {slots} slots are computing useful tokens.",
                            "zh-TW": "{slots} 個位子全都在算有用的 token。"},
    "waste.sentence.useful": {"en": "{useful} of {slots} slots are computing useful tokens.",
                              "zh-TW": "{slots} 個位子裡有 {useful} 個在算有用的 token。"},
    "waste.sentence.total": {"en": "So far {pct:.0f}% of the {total:,.0f} slot-steps did useful work.",
                             "zh-TW": "到目前為止，{total:,.0f} 個位子步中有 {pct:.0f}% 做了有用的工作。"},
    # step composition
    "comp.decode": {"en": "decode tokens", "zh-TW": "decode 的 token"},
    "comp.prefill": {"en": "prefill chunk tokens", "zh-TW": "prefill chunk 的 token"},
    "comp.padding": {"en": "padding tokens", "zh-TW": "padding 的 token"},
    "comp.wasted": {"en": "wasted decode tokens", "zh-TW": "浪費的 decode token"},
    "comp.decodes_of": {"en": "{n} decodes", "zh-TW": "{n} 個 decode"},
    "comp.chunk_of": {"en": "{id}: chunk {a}–{b}", "zh-TW": "{id}：chunk {a}–{b}"},
    "comp.itl": {"en": "longest gap between two tokens of an in-flight request",
                 "zh-TW": "進行中序列的最長 token 間隔"},
    "comp.ttft": {"en": "time to first token of a newcomer", "zh-TW": "新到者的 TTFT"},
    "comp.sentence": {"en": "Step {k}: {decodes} decode tokens and {prefill} prefill tokens in {chunks} chunk(s); "
                            "longest inter-token gap {itl}; step time {dur:.1f} ms.",
                      "zh-TW": "第 {k} 步：{decodes} 個 decode token，加上分成 {chunks} 個 chunk 的 {prefill} 個 "
                               "prefill token；token 之間最長的間隔 {itl}；這一步花了 {dur:.1f} ms。"},
    # KV
    "kv.reserved": {"en": "reserved", "zh-TW": "預留"},
    "kv.cursor": {"en": "at the cursor's step", "zh-TW": "游標所在的那一步"},
    "kv.used": {"en": "used", "zh-TW": "實際用到"},
    "kv.sentence": {"en": "Step {k}: {used:.1f} of {reserved:.1f} {unit} reserved are used ({pct:.0f}%); "
                          "{slots} slots × a slab of {slab:,} positions, reserved from step 0.",
                    "zh-TW": "第 {k} 步：預留的 {reserved:.1f} {unit} 裡實際用到 {used:.1f} {unit}（{pct:.0f}%）；"
                             "{slots} 個位子 × 每個 {slab:,} 個位置的 slab，從第 0 步起就整段預留。"},
    "kv.held": {"en": "held (blocks × block size)", "zh-TW": "持有（區塊數 × 區塊大小）"},
    "kv.preempted": {"en": "preemption", "zh-TW": "搶占"},
    "kv.sentence.paged": {"en": "Step {k}: {used:.1f} of {reserved:.1f} {unit} held in blocks are used ({pct:.0f}%); "
                                "{blocks:,} of {total:,} blocks of {size} positions, taken as sequences grow; "
                                "{preempted} preemption(s) so far.",
                          "zh-TW": "第 {k} 步：區塊持有的 {reserved:.1f} {unit} 裡實際用到 {used:.1f} {unit}（{pct:.0f}%）；"
                                   "{total:,} 個區塊（每塊 {size} 個位置）中有 {blocks:,} 個被持有，序列長到哪裡才配到哪裡；"
                                   "到目前為止搶占了 {preempted} 次。"},
    # block map (the paged layout)
    "title.blocks": {"en": "KV blocks × steps — {blocks:,} blocks of {size} positions in the pool",
                     "zh-TW": "KV 區塊 × 步 — 區塊池共 {blocks:,} 個區塊，每個 {size} 個位置"},
    "axis.block": {"en": "block", "zh-TW": "區塊"},
    "blocks.free": {"en": "free", "zh-TW": "空閒"},
    "blocks.held": {"en": "held by a sequence", "zh-TW": "序列持有"},
    "blocks.waste": {"en": "internal waste (unfilled tail of a last block)",
                     "zh-TW": "內部浪費（最後一個區塊沒填滿的部分）"},
    "blocks.owner": {"en": " · {id}, block {i} of its table", "zh-TW": " · {id}，它的 page table 第 {i} 格"},
    "blocks.hover.waste": {"en": "<br>{w} of {size} positions unfilled", "zh-TW": "<br>{size} 個位置中有 {w} 個沒填"},
    "blocks.hover.cell": {"en": "block %{y} · step %{x}<br>%{text}<extra></extra>",
                          "zh-TW": "區塊 %{y} · 第 %{x} 步<br>%{text}<extra></extra>"},
    "blocks.hover.bin": {"en": "blocks near %{y:.0f} · steps near %{x:.0f}<br>most often: %{text}"
                               "<br>(owner: the cell's first block at its first step)<extra></extra>",
                         "zh-TW": "區塊 %{y:.0f} 附近 · 第 %{x:.0f} 步附近<br>最常見：%{text}"
                                  "<br>（持有者：這一格第一個區塊在第一步時的持有者）<extra></extra>"},
    "blocks.binned": {"en": "{blocks:,} blocks drawn as {rows} rows of {per}, {steps:,} steps as {cols} columns of {bin} "
                            "(most frequent state per cell)",
                      "zh-TW": "{blocks:,} 個區塊畫成 {rows} 列，每列 {per} 個；{steps:,} 步畫成 {cols} 欄，每欄 {bin} 步"
                               "（每格畫出最常出現的狀態）"},
    "blocks.unused": {"en": "blocks {top:,}–{last:,} of the pool were never held (free throughout)",
                      "zh-TW": "區塊池裡第 {top:,}–{last:,} 號區塊從頭到尾都沒被用到（一直空閒）"},
    "blocks.slab": {"en": "This run keeps its KV in slabs (kv_layout='slab'): there are no blocks to draw. Run it "
                          "with kv_layout='paged' to see them.",
                    "zh-TW": "這次執行的 KV 放在 slab 裡（kv_layout='slab'），沒有區塊可畫。改用 kv_layout='paged' "
                             "執行，就看得到區塊。"},
    "blocks.sentence": {"en": "Step {k}: {used:,} of {total:,} blocks ({size} positions each) are held, {free:,} free; "
                              "internal waste {waste:,} positions ({pct:.1f}% of the held positions); {preempted} "
                              "preemption(s) so far, {recomputed:,} tokens recomputed.",
                        "zh-TW": "第 {k} 步：{total:,} 個區塊（每個 {size} 個位置）中有 {used:,} 個被持有、{free:,} 個"
                                 "空閒；內部浪費 {waste:,} 個位置（占持有位置的 {pct:.1f}%）；到目前為止搶占了 "
                                 "{preempted} 次，重算了 {recomputed:,} 個 token。"},
    "knob.kv_layout": {"en": "KV layout", "zh-TW": "KV 佈局"},
    "knob.block_size": {"en": "block size (positions)", "zh-TW": "區塊大小（位置數）"},
    # slabs vs pages (7.4)
    "pages.slabs": {"en": "slabs: one per slot, all reserved", "zh-TW": "slab：每個位子一段，全部事先預留"},
    "pages.blocks": {"en": "blocks of {block} positions, handed out as sequences grow",
                     "zh-TW": "每個區塊 {block} 個位置，序列長到哪裡才配到哪裡"},
    "pages.positions": {"en": "positions", "zh-TW": "位置"},
    "pages.slab_row": {"en": "slot {slot}: {n:,} of {slab:,}", "zh-TW": "位子 {slot}：{n:,} / {slab:,}"},
    "pages.table_row": {"en": "page table of slot {slot}: blocks {blocks}",
                        "zh-TW": "位子 {slot} 的 page table：區塊 {blocks}"},
    # latency
    "lat.ttft": {"en": "time to first token", "zh-TW": "TTFT 的分布"},
    "lat.e2e": {"en": "end-to-end", "zh-TW": "端到端延遲的分布"},
    "lat.p50": {"en": "p50", "zh-TW": "p50"},
    "lat.p99": {"en": "p99", "zh-TW": "p99"},
    "lat.finished": {"en": "{done} of {total} requests finished by step {k}",
                     "zh-TW": "到第 {k} 步為止，{total} 個請求中有 {done} 個已完成"},
    "lat.none": {"en": "no finished requests to draw", "zh-TW": "還沒有完成的請求可畫"},
    # requests
    "req.waiting": {"en": "waiting for a slot", "zh-TW": "等待位子"},
    "req.prefill": {"en": "prefill", "zh-TW": "prefill"},
    "req.decode": {"en": "decode", "zh-TW": "decode"},
    "req.wasted": {"en": "slot held after finishing", "zh-TW": "完成後仍佔著位子"},
    "req.states": {"en": "At step {k}: {counts}", "zh-TW": "第 {k} 步時：{counts}"},
    "state.not arrived": {"en": "not arrived", "zh-TW": "尚未到達"},
    "state.waiting": {"en": "waiting", "zh-TW": "等待中"},
    "state.prefill": {"en": "prefilling", "zh-TW": "prefill 中"},
    "state.decode": {"en": "decoding", "zh-TW": "decode 中"},
    "state.done": {"en": "done", "zh-TW": "已完成"},
    "state.rejected": {"en": "rejected", "zh-TW": "被拒絕"},
    "state.aborted": {"en": "aborted", "zh-TW": "已中止"},
    "widgets.state_count": {"en": "{n} {state}", "zh-TW": "{state} {n} 個"},
    # hover
    "hover.cell": {"en": "step {step} · {id} · {phase}<br>{tokens} tokens (+{padding} padding), positions {a}–{b}"
                         "<br>step time {ms} ms",
                   "zh-TW": "第 {step} 步 · {id} · {phase}<br>{tokens} 個 token（另加 {padding} 個 padding），"
                            "位置 {a}–{b}<br>這一步花了 {ms} ms"},
    "hover.bin": {"en": "steps {a}–{b}: prefill {prefill}, padding {padding}, decode {decode}, wasted {wasted}, "
                        "idle {idle}",
                  "zh-TW": "第 {a}–{b} 步：prefill {prefill}、padding {padding}、decode {decode}、浪費 {wasted}、"
                           "閒置 {idle}"},
    "hover.idle": {"en": "step {step} · idle", "zh-TW": "第 {step} 步 · 閒置"},
    "hover.gap": {"en": "no step: nothing to run until the next arrival", "zh-TW": "沒有步驟：下一個請求到達前無事可做"},
    "hover.template": {"en": "slot %{y}<br>%{text}<extra></extra>", "zh-TW": "位子 %{y}<br>%{text}<extra></extra>"},
    "hover.step_bar": {"en": "%{text}: %{x} tokens<extra></extra>", "zh-TW": "%{text}：%{x} 個 token<extra></extra>"},
    # explorer
    "knob.policy": {"en": "policy", "zh-TW": "策略"},
    "knob.batch_size": {"en": "batch size", "zh-TW": "批次大小 B"},
    "knob.chunk_size": {"en": "chunk length", "zh-TW": "chunk 長度"},
    "knob.max_batch_tokens": {"en": "token budget (auto: chunk + batch)", "zh-TW": "token 預算（自動：chunk + 批次）"},
    "knob.timeout": {"en": "timeout (s)", "zh-TW": "超時（s）"},
    "knob.order": {"en": "newcomers", "zh-TW": "新到者"},
    "knob.prefill_first": {"en": "prefill-first", "zh-TW": "prefill 優先"},
    "knob.decode_first": {"en": "decode-first", "zh-TW": "decode 優先"},
    "knob.max_waiting_steps": {"en": "max waiting steps", "zh-TW": "最多等幾步"},
    "knob.workload": {"en": "workload", "zh-TW": "工作負載"},
    "knob.n": {"en": "requests", "zh-TW": "請求數"},
    "knob.rate": {"en": "arrival rate (req/s)", "zh-TW": "到達率（req/s）"},
    "knob.hardware": {"en": "hardware (modeled clock)", "zh-TW": "硬體（成本模型推算的時鐘）"},
    "knob.kv_budget": {"en": "KV budget", "zh-TW": "KV 預算"},
    "knob.max_model_len": {"en": "slab length (max_model_len)", "zh-TW": "slab 長度（max_model_len）"},
    "opt.preset_len": {"en": "preset's", "zh-TW": "依 preset"},
    "knob.x": {"en": "x axis", "zh-TW": "x 軸"},
    "opt.auto": {"en": "auto", "zh-TW": "自動"},
    "opt.full_batch": {"en": "full batch", "zh-TW": "等到批次滿"},
    "opt.unbounded": {"en": "∞ (until no decode runs)", "zh-TW": "∞（等到沒有 decode 在跑）"},
    "opt.no_cap": {"en": "no cap", "zh-TW": "不設上限"},
    "knob.x.steps": {"en": "steps", "zh-TW": "步"},
    "knob.x.time": {"en": "time", "zh-TW": "時間"},
    "explorer.ok": {"en": "{policy} on {workload}: {steps} steps, {slots} slots, dry run (modeled clock) in {ms:.0f} ms.",
                    "zh-TW": "{policy} 跑 {workload}：{steps} 步、{slots} 個位子；dry run（成本模型推算的時鐘）"
                             "花了 {ms:.0f} ms。"},
    "widgets.ok_rejected": {"en": "{ok} {rejected}.", "zh-TW": "{ok}{rejected}。"},
    "explorer.error": {"en": "Cannot run these settings: {message}. The previous figures stay.",
                       "zh-TW": "這組設定跑不了：{message}。先前的圖表保留不動。"},
    "explorer.empty": {"en": "These settings give a run with no steps ({reason}). The previous figures stay.",
                       "zh-TW": "這組設定跑出來一步也沒有（{reason}）。先前的圖表保留不動。"},
    "explorer.rejected": {"en": "{n} of {total} requests rejected; the first: {first}",
                          "zh-TW": "{total} 個請求中有 {n} 個被拒絕；第一個的原因：{first}"},
    "explorer.real": {"en": "Run on the real model", "zh-TW": "用真的模型跑一次"},
    "explorer.real.running": {"en": "Running the real tiny GPT: {done} of {total} requests, step {steps}. "
                                    "Interrupt the kernel (■) to stop.",
                              "zh-TW": "真的 tiny GPT 執行中：{total} 個請求已完成 {done} 個，第 {steps} 步。"
                                       "要停下來，請中斷 kernel（■）。"},
    "explorer.real.done": {"en": "Real run finished: {steps} steps, wall clock measured on this machine ({s:.1f} s).",
                           "zh-TW": "真實執行完成：{steps} 步，實測（本機時鐘）{s:.1f} s。"},
    "explorer.real.scaled": {"en": "Scaled down for the real run ({knobs}) so it takes seconds; the dry run above "
                                   "used the full workload.",
                             "zh-TW": "真實執行用的是縮小版（{knobs}），幾秒就跑完；上面的 dry run 用的是完整的工作負載。"},
    "explorer.real.tensors": {"en": "Its KV is the tiny GPT's own tensors, sized to the run's longest request "
                                    "({slab:,} positions), not the slab length above (the modeled server's).",
                              "zh-TW": "它的 KV 是 tiny GPT 自己的張量，大小依這次最長的請求而定（{slab:,} 個位置），"
                                       "不是上面的 slab 長度（那是成本模型裡那台伺服器的）。"},
    "explorer.real.interrupted": {"en": "Real run interrupted after {steps} steps; the previous figures stay.",
                                  "zh-TW": "真實執行在第 {steps} 步後被中斷；先前的圖表保留不動。"},
    "explorer.real.too_big": {"en": "This workload is too long for a real run here ({tokens:,} tokens; limit "
                                    "{limit:,}). Lower the request count.",
                              "zh-TW": "這個工作負載太長，這裡無法真的跑（{tokens:,} 個 token，上限 {limit:,}）。"
                                       "請減少請求數。"},
    "explorer.real.too_slow": {"en": "A real run of these settings would take about {s:.0f} s on this CPU (the "
                                     "cpu-tiny cost model's estimate of the same steps; limit {limit:.0f} s). Lower "
                                     "the request count or move the knob back.",
                               "zh-TW": "這組設定在這顆 CPU 上真的跑，大約要 {s:.0f} s（cpu-tiny 成本模型對同樣這些步的"
                                        "估計；上限 {limit:.0f} s）。請減少請求數，或把剛才調的滑桿調回去。"},
    "compare.left": {"en": "A", "zh-TW": "A"},
    "compare.right": {"en": "B", "zh-TW": "B"},
    "compare.sentence": {"en": "{a}: {ua:.0f}% useful slot-steps, p99 TTFT {ta}; {b}: {ub:.0f}% useful, "
                               "p99 TTFT {tb}.",
                         "zh-TW": "{a}：有用的位子步 {ua:.0f}%，p99 TTFT {ta}；{b}：有用的 {ub:.0f}%，p99 TTFT {tb}。"},
    "unit.ms": {"en": "{v:.1f} ms", "zh-TW": "{v:.1f} ms"},
    "unit.none": {"en": "—", "zh-TW": "—"},
    # joining the widgets' own pieces: sentences, list items
    "widgets.join.sentences": {"en": "{a} {b}", "zh-TW": "{a}{b}"},
    "widgets.join.list": {"en": ", ", "zh-TW": "、"},
    "widgets.join.clause": {"en": "; ", "zh-TW": "；"},
    # errors a notebook's call can meet
    "widgets.error.views": {"en": "views: unknown {unknown} (choose from {choices})",
                            "zh-TW": "views：沒有 {unknown} 這種圖（可選：{choices}）"},
    "widgets.error.knobs": {"en": "knobs: unknown {unknown} (choose from {choices})",
                            "zh-TW": "knobs：沒有 {unknown} 這個設定（可選：{choices}）"},
    "widgets.error.x": {"en": "x: must be 'steps' or 'time', got {x!r}",
                        "zh-TW": "x 必須是 'steps' 或 'time'，收到的是 {x!r}"},
    "widgets.error.traces": {"en": "traces: at most {most} in one latency view, got {n}",
                             "zh-TW": "traces：一張延遲圖最多畫 {most} 份，收到 {n} 份"},
    # Predict, then reveal (predict.py)
    "predict.placeholder": {"en": "your number", "zh-TW": "你的數字"},
    "predict.lock": {"en": "Lock in", "zh-TW": "鎖定"},
    "predict.locked": {"en": "Your prediction: {guess}. Run on; the answer comes further down.",
                       "zh-TW": "你的預測：{guess}。繼續往下執行，答案在後面。"},
    "predict.empty": {"en": "Type a number first.", "zh-TW": "請先輸入一個數字。"},
    "predict.not_number": {"en": "“{text}” is not a number: type digits such as 1980, 1,980 or 2e3.",
                           "zh-TW": "「{text}」不是數字：請輸入像 1980、1,980 或 2e3 這樣的數字（全形數字也可以）。"},
    "predict.not_finite": {"en": "“{text}” is not a finite number.", "zh-TW": "「{text}」不是有限的數字。"},
    "predict.range": {"en": "{guess} is outside {lo} .. {hi}.", "zh-TW": "{guess} 不在 {lo} .. {hi} 之間。"},
    "predict.below": {"en": "{guess} cannot be the answer: it must be at least {lo}. Your entry is kept; change it.",
                      "zh-TW": "{guess} 不可能是答案：答案至少是 {lo}。你輸入的還在，請改一下。"},
    "predict.above": {"en": "{guess} cannot be the answer: it must be at most {hi}. Your entry is kept; change it.",
                      "zh-TW": "{guess} 不可能是答案：答案最多是 {hi}。你輸入的還在，請改一下。"},
    "predict.absurd": {"en": "{guess} is far beyond anything this question can give (more than {limit}). "
                             "Your entry is kept; check the digits.",
                       "zh-TW": "{guess} 遠遠超出這一題可能的答案（大於 {limit}）。你輸入的還在，請檢查位數。"},
    "predict.revealed": {"en": "Already revealed: the prediction is locked.", "zh-TW": "答案已經揭曉，預測鎖定了。"},
    "predict.static": {"en": "Predict: {question} (run the notebook to type your answer; it is revealed further down)",
                       "zh-TW": "預測：{question}（執行 notebook 才能輸入你的答案；答案在後面揭曉）"},
    "predict.answer": {"en": "Engine: {answer}{unit}.", "zh-TW": "引擎：{answer}{unit}。"},
    "predict.none": {"en": "Engine: {answer}{unit}. (No prediction entered: type one above, then run this cell again.)",
                     "zh-TW": "引擎：{answer}{unit}。（還沒有輸入預測：先在上面輸入，再執行一次這個 cell。）"},
    "predict.exact": {"en": "You said {guess}{unit}; the engine says {answer}{unit}: exactly right.",
                      "zh-TW": "你預測 {guess}{unit}，引擎算出 {answer}{unit}：完全正確。"},
    "predict.close": {"en": "You said {guess}{unit}; the engine says {answer}{unit}: {off} {dir}, close.",
                      "zh-TW": "你預測 {guess}{unit}，引擎算出 {answer}{unit}：{dir} {off}，很接近。"},
    "predict.far": {"en": "You said {guess}{unit}; the engine says {answer}{unit}: {off} {dir}.",
                    "zh-TW": "你預測 {guess}{unit}，引擎算出 {answer}{unit}：{dir} {off}。"},
    "predict.low": {"en": "low", "zh-TW": "偏低"},
    "predict.high": {"en": "high", "zh-TW": "偏高"},
    "predict.off_rel": {"en": "{rel:.0%} off", "zh-TW": "{rel:.0%}"},
    "predict.off_abs": {"en": "{diff}{unit} off", "zh-TW": "{diff}{unit}"},
    "predict.bad_answer": {"en": "answer: must be a finite number, got {answer!r}",
                           "zh-TW": "answer 必須是有限的數字，收到的是 {answer!r}"},
    # sweep pictures (sweep_plots.py)
    "sweep_plots.no_rate": {"en": "no rate meets: {missing}", "zh-TW": "沒有任何到達率達標：{missing}"},
    "sweep_plots.target": {"en": "P99 inter-token gap target (ms, modeled)",
                           "zh-TW": "p99 token 間隔的目標（ms，模型推算）"},
    "sweep_plots.capacity": {"en": "capacity (requests/s)", "zh-TW": "容量（請求/s）"},
    "sweep_plots.ttft": {"en": "time to first token (s, modeled)", "zh-TW": "TTFT（s，模型推算）"},
    "sweep_plots.e2e": {"en": "end-to-end latency (s, modeled)", "zh-TW": "端到端延遲（s，模型推算）"},
    "sweep_plots.fraction": {"en": "fraction of requests\n({load:g} req/s)", "zh-TW": "請求的比例\n（{load:g} req/s）"},
}
