"""The classroom's words: the exercises' check messages, the self-check's report, the grader's reasons.

Keys are "classroom.<name>"; lib/tinyserve/classroom/text.py's say(name, ...) fills them. The instructor's CSV
columns and result codes (passed, failed, blank, integrity, manual, invalid) are data, not here.
"""
from __future__ import annotations

_W: dict[str, dict[str, str]] = {
    # ------------------------------------------------------------------------------- checkers: integrity
    "integrity": {
        "en": "INTEGRITY: {why}",
        "zh-TW": "INTEGRITY（誠信檢查）：{why}"},
    "rebound": {
        "en": "AssertionError was rebound, so checks could not fail; restart the kernel and remove that",
        "zh-TW": "AssertionError 被重新指定了，檢查因此永遠不會失敗；請重新啟動 kernel，並刪掉那一行"},
    "custom_exc": {
        "en": "an IPython custom exception handler (set_custom_exc) would hide failing checks",
        "zh-TW": "裝了 IPython 自訂例外處理器（set_custom_exc），失敗的檢查會被它藏起來"},
    "called_builtin": {
        "en": "your answer called {what}; the exercise is to write this part yourself",
        "zh-TW": "你的答案呼叫了{what}；這個練習要你自己寫出這一部分"},
    "what_builtin": {
        "en": "the built-in {cls}.{name}",
        "zh-TW": "內建的 {cls}.{name}"},
    "what_engine": {
        "en": "the engine (Engine.start / tinyserve.run)",
        "zh-TW": "引擎（Engine.start / tinyserve.run）"},
    "what_run_step": {
        "en": "the engine (Run.step)",
        "zh-TW": "引擎（Run.step）"},
    "not_policy": {
        "en": "expected a class that subclasses tinyserve.policies.Policy, got {got}",
        "zh-TW": "這裡要的是繼承 tinyserve.policies.Policy 的類別，收到的卻是 {got}"},
    "subclasses_builtin": {
        "en": "{cls} subclasses the built-in {ref}; subclass Policy and write plan()",
        "zh-TW": "{cls} 繼承了內建的 {ref}；請改為繼承 Policy，自己寫 plan()"},
    "copies_builtin": {
        "en": "{cls}.{name} is the built-in {ref}; write it yourself",
        "zh-TW": "{cls}.{name} 就是內建的 {ref}；請自己寫"},
    # ------------------------------------------------------------------------------ checkers: not written
    "init_not_written": {
        "en": "your policy's __init__ is not written yet ({err})",
        "zh-TW": "你的策略的 __init__ 還沒寫（{err}）"},
    "part_not_written": {
        "en": "part of your policy is not written yet (NotImplementedError: {err})",
        "zh-TW": "你的策略有一部分還沒寫（NotImplementedError: {err}）"},
    "fn_not_written": {
        "en": "{fn} is not written yet ({err})",
        "zh-TW": "{fn} 還沒寫（{err}）"},
    "your_function": {
        "en": "your function",
        "zh-TW": "你的函式"},
    # ----------------------------------------------------------------------------- checkers: policy steps
    "where": {
        "en": "[workload seed {seed}: {n} requests, {knobs}] ",
        "zh-TW": "［工作負載種子 {seed}：{n} 個請求，{knobs}］"},
    "init_failed": {
        "en": "{cls}({args}) failed: {err}",
        "zh-TW": "{cls}({args}) 失敗：{err}"},
    "not_plan": {
        "en": "step {idx}: plan() must return Plan(works), got {got}",
        "zh-TW": "第 {idx} 步：plan() 必須回傳 Plan(works)，卻回傳了 {got}"},
    "not_works": {
        "en": "step {idx}: Plan.works must be a list of Work, got {got}",
        "zh-TW": "第 {idx} 步：Plan.works 必須是由 Work 組成的 list，收到的是 {got}"},
    "not_running": {
        "en": "step {idx}: your plan computes {rid}, which is not in self.running (admit a request by claiming "
              "a slot for it: req.slot = self.pool.claim(); self.running.append(req))",
        "zh-TW": "第 {idx} 步：你的計畫要算 {rid}，但它不在 self.running 裡（要讓請求進來，先替它占一個位子："
                 "req.slot = self.pool.claim(); self.running.append(req)）"},
    "already_done": {
        "en": "step {idx}: your plan asks {rid} to {phase}, but {rid} already finished; it must leave "
              "self.running and give its slot back when it finishes",
        "zh-TW": "第 {idx} 步：你的計畫要 {rid} 做 {phase}，但 {rid} 已經完成了；請求一完成就該離開 "
                 "self.running，並把位子還回去"},
    "wrong_slot": {
        "en": "step {idx}: {rid} holds slot {held}, but your Work puts it on slot {slot}",
        "zh-TW": "第 {idx} 步：{rid} 占的是位子 {held}，你的 Work 卻把它放在位子 {slot}"},
    "two_on_slot": {
        "en": "step {idx}: two works on slot {slot}; a slot computes for one request per step",
        "zh-TW": "第 {idx} 步：位子 {slot} 上有兩份 Work；一個位子每一步只替一個請求計算"},
    "bad_prefill": {
        "en": "step {idx}: {rid} has {done} of its {total} prompt tokens in its KV; a prefill must continue at "
              "position {done} with 1..{left} tokens, yours covers {lo}..{hi}",
        "zh-TW": "第 {idx} 步：{rid} 的 {total} 個提示詞 token 已有 {done} 個進了 KV；prefill 必須從位置 {done} "
                 "接著做，長度 1..{left} 個 token，你的卻涵蓋 {lo}..{hi}"},
    "early_decode": {
        "en": "step {idx}: {rid} decodes before its prompt is prefilled ({done} of {total} tokens)",
        "zh-TW": "第 {idx} 步：{rid} 的提示詞還沒 prefill 完（{total} 個 token 只做了 {done} 個）就開始 decode"},
    "bad_phase": {
        "en": "step {idx}: unknown phase {phase!r} (prefill, decode or wasted)",
        "zh-TW": "第 {idx} 步：不認得的 phase {phase!r}（只能是 prefill、decode 或 wasted）"},
    "over_batch": {
        "en": "step {idx}: your plan computes for {n} requests, more than batch_size={b}",
        "zh-TW": "第 {idx} 步：你的計畫替 {n} 個請求計算，超過了 batch_size={b}"},
    "over_budget": {
        "en": "step {idx}: your plan computes {n} tokens ({works}), over the token budget max_batch_tokens={b}",
        "zh-TW": "第 {idx} 步：你的計畫算了 {n} 個 token（{works}），超出 token 預算 max_batch_tokens={b}"},
    "fmt_prefill": {
        "en": "{rid} prefill of positions {lo}..{hi}{pad} on slot {slot}",
        "zh-TW": "{rid} 在位子 {slot} 上 prefill 位置 {lo}..{hi}{pad}"},
    "fmt_pad": {
        "en": " + {n} padding",
        "zh-TW": " 加 {n} 個 padding"},
    "fmt_other": {
        "en": "{rid} {phase} on slot {slot}",
        "zh-TW": "{rid} 在位子 {slot} 上做 {phase}"},
    "extra_work": {
        "en": "you computed {work}; the reference did not compute {rid} in this step",
        "zh-TW": "你算了 {work}；參考策略這一步沒有算 {rid}"},
    "missing_work": {
        "en": "you did not compute {rid}; the reference computed {work}",
        "zh-TW": "你沒有算 {rid}；參考策略算了 {work}"},
    "other_work": {
        "en": "{rid}: you computed {mine}, the reference {ref}",
        "zh-TW": "{rid}：你算的是 {mine}，參考策略算的是 {ref}"},
    "wrong_time": {
        "en": "the same works, but your step started at t = {mine:.1f} ms and the reference's at t = {ref:.1f} ms "
              "(a batch launched at the wrong time)",
        "zh-TW": "算的東西一樣，但你這一步在 t = {mine:.1f} ms 開始，參考策略在 t = {ref:.1f} ms"
                 "（批次發車的時間不對）"},
    "diff_head": {
        "en": "step {idx} (t = {t:.1f} ms): ",
        "zh-TW": "第 {idx} 步（t = {t:.1f} ms）："},
    "diff_ref": {
        "en": ". The reference's step {idx} (t = {t:.1f} ms): {works}",
        "zh-TW": "。參考策略的第 {idx} 步（t = {t:.1f} ms）：{works}"},
    "diff_state": {
        "en": ". When your policy planned it: running {running}, waiting {waiting}, {free} free slot(s), "
              "batch_size={b}",
        "zh-TW": "。你的策略規劃這一步時：執行中 {running}，等待中 {waiting}，空位子 {free} 個，batch_size={b}"},
    "hint_sep": {
        "en": ". {hint}",
        "zh-TW": "。{hint}"},
    "none": {
        "en": "none",
        "zh-TW": "無"},
    "arrived": {
        "en": "{rid} (arrived {ms:.0f} ms)",
        "zh-TW": "{rid}（{ms:.0f} ms 到達）"},
    "unfinished": {
        "en": "your policy did not finish the workload: after {steps} steps {left} are unfinished",
        "zh-TW": "你的策略沒有跑完這份工作負載：{steps} 步之後，{left} 還沒完成"},
    "policy_raised": {
        "en": "step {idx}: your policy raised {exc}: {err}",
        "zh-TW": "第 {idx} 步：你的策略丟出了 {exc}: {err}"},
    "slot_leak": {
        "en": "after step {idx}, {held} slots are claimed but only {running} requests are running: a finished "
              "request's slot was not given back (self.pool.release(req.slot)); finished so far: {gone}",
        "zh-TW": "第 {idx} 步之後，有 {held} 個位子被占用，執行中的請求卻只有 {running} 個：某個完成的請求沒有"
                 "把位子還回去（self.pool.release(req.slot)）；目前已完成：{gone}"},
    "extra_step": {
        "en": "your policy ran a step {idx}; the reference had finished everything after {n} steps",
        "zh-TW": "你的策略跑了第 {idx} 步；參考策略在 {n} 步後就全部做完了"},
    "step_count": {
        "en": "your policy finished after {mine} steps, the reference after {ref}",
        "zh-TW": "你的策略跑了 {mine} 步才結束，參考策略是 {ref} 步"},
    "other_tokens": {
        "en": "{rid} generated different tokens than under the reference: the same model must give the same "
              "tokens when the same positions are computed; check the prefill positions",
        "zh-TW": "{rid} 產出的 token 和參考策略下的不同：同一個模型算同樣的位置，必定得到同樣的 token；"
                 "請檢查 prefill 的位置"},
    "metric": {
        "en": "metric {key}: yours {mine}, the reference's {ref}",
        "zh-TW": "指標 {key}：你的是 {mine}，參考策略的是 {ref}"},
    "no_free_slot": {
        "en": "step {idx}: your policy claimed a slot when none was free ({held} of {slots} held; running "
              "{running}, batch_size={b}). Does plan() stop admitting at batch_size, and is the slot of every "
              "finished request given back?",
        "zh-TW": "第 {idx} 步：沒有空位子了，你的策略還在占位子（{slots} 個位子占了 {held} 個；執行中 "
                 "{running}，batch_size={b}）。plan() 收滿 batch_size 有沒有停下來？每個完成的請求有沒有把"
                 "位子還回去？"},
    "released_twice": {
        "en": "step {idx}: your policy released a slot twice ({err}); release a request's slot once, when it "
              "finishes",
        "zh-TW": "第 {idx} 步：你的策略把同一個位子釋放了兩次（{err}）；請求完成時，它的位子只釋放一次"},
    "stalled": {
        "en": "step {idx}: your policy returned an empty plan with requests waiting {waiting} and none left to "
              "arrive: they would wait forever (launch what is waiting when nothing more comes)",
        "zh-TW": "第 {idx} 步：還有請求在等 {waiting}，也不會再有新請求到達，你的策略卻回傳空的計畫：它們會永遠"
                 "等下去（不會再有人來時，就讓等待中的請求發車）"},
    "bad_wake": {
        "en": "step {idx}: Plan.wake_s must be later than now ({err})",
        "zh-TW": "第 {idx} 步：Plan.wake_s 必須晚於現在（{err}）"},
    "engine_stopped": {
        "en": "step {idx}: the engine stopped: {err}",
        "zh-TW": "第 {idx} 步：引擎停下來了：{err}"},
    "policy_passed": {
        "en": "passed: {cls} matched the built-in {kind} policy step for step on {n} fresh workloads",
        "zh-TW": "通過：在 {n} 份新抽的工作負載上，{cls} 每一步都和內建的 {kind} 策略一致"},
    "hint_dynamic": {
        "en": "Launch when the batch is full, when the oldest waiting request has waited `timeout`, or when "
              "nothing more will arrive; otherwise wait (Plan([], wake_s=deadline)).",
        "zh-TW": "批次滿了、等最久的請求已等滿 `timeout`，或不會再有請求到達時，就發車；否則就等"
                 "（Plan([], wake_s=deadline)）。"},
    "hint_continuous": {
        "en": "Every step: running requests that are prefilled decode; waiting requests enter free slots "
              "(FIFO, up to batch_size) and prefill their whole prompt in the same step.",
        "zh-TW": "每一步：已經 prefill 完的執行中請求做 decode；等待中的請求依先來後到進入空位子（最多到 "
                 "batch_size），並在同一步 prefill 整段提示詞。"},
    "hint_decode_first": {
        "en": "Newcomers wait while anything decodes; count the decode steps in which one could have "
              "entered (a request waiting, a slot free, fewer than batch_size running); when that count "
              "reaches max_waiting_steps, or nothing is decoding, admit (FIFO) and start counting again.",
        "zh-TW": "只要還有序列在 decode，新到者就先等；數一數有哪些 decode 步驟其實可以讓新到者進來（有請求在等、"
                 "有空位子、執行中的少於 batch_size）；這個數字到達 max_waiting_steps，或沒有任何序列在 "
                 "decode 時，就依先來後到讓它們進來，並重新開始計數。"},
    "hint_chunked": {
        "en": "Admit into free slots first; then every prefilled request decodes; then the budget left goes "
              "to prefill chunks (at most chunk_size each) in admission order.",
        "zh-TW": "先讓請求進入空位子；接著每個 prefill 完的請求做 decode；剩下的預算再依進場順序分給 prefill "
                 "的 chunk（每個最多 chunk_size）。"},
    # --------------------------------------------------------------------------- checkers: numeric answers
    "not_whole": {
        "en": "{fn} must return a whole number, got {got}",
        "zh-TW": "{fn} 必須回傳整數，收到的是 {got}"},
    "not_whole_tokens": {
        "en": "{fn} must return a whole number of tokens, got {got}",
        "zh-TW": "{fn} 必須回傳整數個 token，收到的是 {got}"},
    "padding_wrong": {
        "en": "for prompts of {lens} tokens in one static batch, the engine's prefill computed {truth} padding "
              "tokens; your padding_tokens returned {got}",
        "zh-TW": "提示詞長度為 {lens} 個 token 的一個靜態批次，引擎的 prefill 算了 {truth} 個 padding token；"
                 "你的 padding_tokens 回傳 {got}"},
    "padding_passed": {
        "en": "passed: padding_tokens agreed with the engine's trace on {n} batches",
        "zh-TW": "通過：padding_tokens 在 {n} 個批次上都和引擎的 trace 一致"},
    "wasted_wrong": {
        "en": "for outputs {outs} in static batches of {b} (in arrival order), the engine's decode steps computed "
              "{useful} useful and {wasted} wasted tokens (the first token of each request comes from its "
              "prefill): a wasted fraction of {truth:.6f}; your wasted_fraction returned {got}",
        "zh-TW": "輸出長度 {outs}，依到達順序每 {b} 個組成一個靜態批次，引擎的 decode 步驟算了 {useful} 個有用的"
                 "和 {wasted} 個浪費的 token（每個請求的第一個 token 來自它的 prefill）：浪費比例是 "
                 "{truth:.6f}；你的 wasted_fraction 回傳 {got}"},
    "outs_long": {
        "en": "[{first}, then {n} x {second}]",
        "zh-TW": "［{first}，接著 {n} 個 {second}］"},
    "wasted_passed": {
        "en": "passed: wasted_fraction agreed with the engine's trace on {n} workloads",
        "zh-TW": "通過：wasted_fraction 在 {n} 份工作負載上都和引擎的 trace 一致"},
    "trace_label": {
        "en": "{kind} (workload seed {seed})",
        "zh-TW": "{kind}（工作負載種子 {seed}）"},
    "first_step_wrong": {
        "en": "in a {label} trace, {rid} (arrived at t = {ms:.1f} ms) was first computed in step {truth} "
              "({work}); your first_step returned {got}",
        "zh-TW": "在一份 {label} trace 裡，{rid}（t = {ms:.1f} ms 到達）第一次被計算是在第 {truth} 步"
                 "（{work}）；你的 first_step 回傳 {got}"},
    "first_step_passed": {
        "en": "passed: first_step agreed with {n} traces",
        "zh-TW": "通過：first_step 和 {n} 份 trace 都一致"},
    "slot_waste_wrong": {
        "en": "in a {label} trace, slot {slot} computed {pad} padding tokens and {wasted} wasted decode "
              "tokens = {total} thrown away; your slot_waste returned {got}",
        "zh-TW": "在一份 {label} trace 裡，位子 {slot} 算了 {pad} 個 padding token 和 {wasted} 個浪費的 "
                 "decode token，共丟掉 {total} 個；你的 slot_waste 回傳 {got}"},
    "slot_waste_passed": {
        "en": "passed: slot_waste agreed with {n} traces",
        "zh-TW": "通過：slot_waste 和 {n} 份 trace 都一致"},
    "pick_chunk_row": {
        "en": "{c}: gap {g:.1f} ms / TTFT {t:.1f} ms",
        "zh-TW": "{c}：間隔 {g:.1f} ms／TTFT {t:.1f} ms"},
    "pick_chunk_wrong": {
        "en": "targets: worst gap <= {itl:.1f} ms and newcomer TTFT <= {ttft:.1f} ms. The engine measured "
              "{rows}. The largest chunk meeting both is {truth}; your pick_chunk returned {got}",
        "zh-TW": "目標：最差 token 間隔 <= {itl:.1f} ms，且新到者的 TTFT <= {ttft:.1f} ms。引擎量到的是 "
                 "{rows}。兩個目標都達到的最大 chunk 是 {truth}；你的 pick_chunk 回傳 {got}"},
    "pick_chunk_passed": {
        "en": "passed: pick_chunk chose right for {n} pairs of targets (workload seed {seed})",
        "zh-TW": "通過：pick_chunk 在 {n} 組目標上都選對了（工作負載種子 {seed}）"},
    "slabs_wrong": {
        "en": "with {memory:,} bytes of KV memory, slabs of max_len={max_len} positions and {bpt:,} bytes of K "
              "and V per position, the engine made {truth} slots; your slabs_that_fit returned {got}",
        "zh-TW": "KV 記憶體 {memory:,} 位元組，每段 slab 有 max_len={max_len} 個位置，每個位置的 K 和 V 占 "
                 "{bpt:,} 位元組，引擎做出 {truth} 個位子；你的 slabs_that_fit 回傳 {got}"},
    "slabs_passed": {
        "en": "passed: slabs_that_fit agreed with the engine's slot pool on {n} memories",
        "zh-TW": "通過：slabs_that_fit 在 {n} 種記憶體大小上都和引擎的位子池一致"},
    "kv_wrong": {
        "en": "after step {idx}, {rid} (a {prompt}-token prompt, {gen} token(s) generated) has K/V for {ctx} "
              "positions in the engine = {truth:,} bytes ({bpt:,} bytes per position); your "
              "kv_bytes_used({prompt}, {gen}, {bpt}) returned {got:,}",
        "zh-TW": "第 {idx} 步之後，{rid}（提示詞 {prompt} 個 token，已產出 {gen} 個 token）在引擎裡存了 {ctx} "
                 "個位置的 K/V，共 {truth:,} 位元組（每個位置 {bpt:,} 位元組）；你的 "
                 "kv_bytes_used({prompt}, {gen}, {bpt}) 回傳 {got:,}"},
    "kv_sum_wrong": {
        "en": "after step {idx} the trace reports {truth:,} KV bytes in use; the sum of your kv_bytes_used is "
              "{got:,}",
        "zh-TW": "第 {idx} 步之後，trace 記錄的 KV 用量是 {truth:,} 位元組；你的 kv_bytes_used 加總是 {got:,}"},
    "kv_passed": {
        "en": "passed: kv_bytes_used agreed with the trace's KV bytes in use on every step (workload seed {seed})",
        "zh-TW": "通過：kv_bytes_used 在每一步都和 trace 的 KV 用量一致（工作負載種子 {seed}）"},
    # the token-budget chunker
    "chunker_not_list": {
        "en": "{where}step {idx}: plan_chunks must return a list of whole numbers, one per prefilling "
              "request, got {got}",
        "zh-TW": "{where}第 {idx} 步：plan_chunks 必須回傳整數組成的 list，每個還在 prefill 的請求一個，"
                 "收到的是 {got}"},
    "chunker_len": {
        "en": "{where}step {idx}: {n} requests were still prefilling ({state}), your plan_chunks returned {m} "
              "numbers",
        "zh-TW": "{where}第 {idx} 步：還有 {n} 個請求在 prefill（{state}），你的 plan_chunks 卻回傳了 {m} "
                 "個數字"},
    "chunker_wrong": {
        "en": "{where}step {idx}: with {decodes} decode(s) in the step, chunk_size={c}, max_batch_tokens={b} and "
              "prompts still prefilling {state}, the engine's chunked policy gave them {truth} tokens; your "
              "plan_chunks gave {got}",
        "zh-TW": "{where}第 {idx} 步：這一步有 {decodes} 個 decode，chunk_size={c}，max_batch_tokens={b}，"
                 "還在 prefill 的提示詞是 {state}，引擎的 chunked 策略分給它們 {truth} 個 token；你的 "
                 "plan_chunks 給的是 {got}"},
    "chunker_state": {
        "en": "{rid} {done}/{total}",
        "zh-TW": "{rid} {done}/{total}"},
    "chunker_passed": {
        "en": "passed: plan_chunks matched the engine's chunked policy on every step of {n} fresh workloads",
        "zh-TW": "通過：在 {n} 份新抽的工作負載上，plan_chunks 每一步都和引擎的 chunked 策略一致"},
    # the slab allocator
    "slabs_count": {
        "en": "{where}with kv_budget={memory:,} bytes, slabs of {max_len} positions x {bpt:,} bytes and "
              "batch_size={b}, the engine made {truth} slots; your MySlabs made num_slots={got}",
        "zh-TW": "{where}kv_budget={memory:,} 位元組，每段 slab {max_len} 個位置 x {bpt:,} 位元組，"
                 "batch_size={b}，引擎做出 {truth} 個位子；你的 MySlabs 做出 num_slots={got}"},
    "slabs_claim": {
        "en": "{where}step {idx}: the engine's pool gave slot {truth} to {rid} ({free} free before); your "
              "claim() returned {got}",
        "zh-TW": "{where}第 {idx} 步：引擎的位子池把位子 {truth} 給了 {rid}（之前有 {free} 個空位子）；"
                 "你的 claim() 回傳 {got}"},
    "slabs_free": {
        "en": "{where}step {idx}: the engine's pool has {truth} free slot(s); your num_free says {got}",
        "zh-TW": "{where}第 {idx} 步：引擎的位子池有 {truth} 個空位子；你的 num_free 說是 {got}"},
    "slabs_held": {
        "en": "{where}after step {idx}: the engine's pool holds {truth:,} bytes in claimed slabs ({held} "
              "slab(s) held); your held_bytes() says {got}",
        "zh-TW": "{where}第 {idx} 步之後：引擎的位子池中被占用的 slab 共 {truth:,} 位元組（占用 {held} 段）；"
                 "你的 held_bytes() 說是 {got}"},
    "slabs_overcommit": {
        "en": "{where}step {idx}: every one of the {n} slabs is held, yet your claim() handed out slot "
              "{got}: it must refuse (return None) instead of promising memory that is not there",
        "zh-TW": "{where}第 {idx} 步：{n} 段 slab 全都被占用了，你的 claim() 卻還發出位子 {got}：這時必須"
                 "拒絕（回傳 None），不能承諾根本不存在的記憶體"},
    "slabs_release_twice": {
        "en": "{where}releasing slot {slot}, which is not held, must raise ValueError; your release() "
              "accepted it",
        "zh-TW": "{where}釋放沒被占用的位子 {slot} 必須丟出 ValueError；你的 release() 卻接受了"},
    "slabs_raised": {
        "en": "{where}step {idx}: your MySlabs.{method} raised {exc}: {err}",
        "zh-TW": "{where}第 {idx} 步：你的 MySlabs.{method} 丟出了 {exc}: {err}"},
    "slabs_alloc_passed": {
        "en": "passed: MySlabs matched the engine's slot pool on every claim and release of {n} fresh runs",
        "zh-TW": "通過：在 {n} 次新的執行中，MySlabs 的每一次 claim 和 release 都和引擎的位子池一致"},
    "bpt_changed": {
        "en": "the engine's KV bytes per position changed between runs",
        "zh-TW": "引擎每個位置的 KV 位元組數在兩次執行之間變了"},
    # predict -> derive -> check
    "reflect_head": {
        "en": "{title}",
        "zh-TW": "{title}"},
    "reflect_guess": {
        "en": "  your prediction: {guess}",
        "zh-TW": "  你的預測：{guess}"},
    "reflect_no_guess": {
        "en": "  your prediction: (none written down)",
        "zh-TW": "  你的預測：（沒有寫下來）"},
    "reflect_fn": {
        "en": "  your function:   {got}",
        "zh-TW": "  你的函式：{got}"},
    "reflect_fn_missing": {
        "en": "  your function:   not written yet",
        "zh-TW": "  你的函式：還沒寫"},
    "reflect_engine": {
        "en": "  the engine:      {truth}",
        "zh-TW": "  引擎：    {truth}"},
    "reflect_note": {
        "en": "  {note}",
        "zh-TW": "  {note}"},
    "reflect_padding": {
        "en": "A static batch of a 50- and a 4,000-token prompt (padding tokens of its prefill):",
        "zh-TW": "一個靜態批次，提示詞分別是 50 和 4,000 個 token（它的 prefill 算了多少 padding token）："},
    "reflect_wasted": {
        "en": "The chapter's batch: one 2,000-token output and 31 of 20 tokens, batch size 32 "
              "(wasted share of the decode tokens):",
        "zh-TW": "本章的那個批次：一個輸出 2,000 個 token、31 個各輸出 20 個 token，批次大小 32"
                 "（decode token 中浪費的比例）："},
    "reflect_wasted_note": {
        "en": "over all 32 slots; over the 31 short requests' slots alone the engine wasted {short:.1%} "
              "of their decode steps (the 7.1 notebook's figure: a different denominator)",
        "zh-TW": "這是 32 個位子全部算進去的比例；只看 31 個短請求的位子，引擎浪費了它們 {short:.1%} 的 "
                 "decode 步驟（7.1 notebook 裡的那個數字：分母不同）"},
    # ------------------------------------------------------------------------------------ self-check report
    "sc_correct": {
        "en": "correct",
        "zh-TW": "正確"},
    "sc_wrong": {
        "en": "wrong",
        "zh-TW": "錯誤"},
    "sc_blank": {
        "en": "not attempted",
        "zh-TW": "還沒作答"},
    "sc_manual": {
        "en": "open question: graded by your teacher (see the rubric they give you)",
        "zh-TW": "開放題：由老師評分（看老師給你的評分標準）"},
    "sc_line": {
        "en": "{mark} {label}: {status}{msg}",
        "zh-TW": "{mark} {label}：{status}{msg}"},
    "sc_msg": {
        "en": " — {message}",
        "zh-TW": "——{message}"},
    "sc_total": {
        "en": "{correct} of {total} answers correct ({points:g} of {max_points:g} points); {blank} not attempted",
        "zh-TW": "{total} 題答對 {correct} 題（{max_points:g} 分拿到 {points:g} 分）；{blank} 題還沒作答"},
    "sc_bad_file": {
        "en": "{path}: {why}",
        "zh-TW": "{path}：{why}"},
    "sc_running": {
        "en": "checking {path} (runs your notebook's code cells in order, then each check) ...",
        "zh-TW": "正在檢查 {path}（依序執行你的 notebook 的程式碼儲存格，再跑每一項檢查）……"},
    "text_stub": {  # a written answer's cell as handed out; the English is nbgrader's text_stub, exactly
        "en": "YOUR ANSWER HERE",
        "zh-TW": "在這裡寫下你的答案（YOUR ANSWER HERE）"},
    # exercise names as the self-check prints them (the grader's CSV keeps the English names: they are data)
    "label.7.1 (a) padding tokens": {"en": "7.1 (a) padding tokens", "zh-TW": "7.1 (a) padding token 數"},
    "label.7.1 (b) wasted fraction": {"en": "7.1 (b) wasted fraction", "zh-TW": "7.1 (b) 浪費比例"},
    "label.7.1 (c) dynamic batching policy": {"en": "7.1 (c) dynamic batching policy",
                                              "zh-TW": "7.1 (c) 動態批次策略"},
    "label.7.2 (d) continuous batching policy": {"en": "7.2 (d) continuous batching policy",
                                                 "zh-TW": "7.2 (d) 連續批次策略"},
    "label.7.2 (e) decode-first with a bound": {"en": "7.2 (e) decode-first with a bound",
                                                "zh-TW": "7.2 (e) 有上限的 decode 優先"},
    "label.7.2 (f) first step of a request": {"en": "7.2 (f) first step of a request",
                                              "zh-TW": "7.2 (f) 請求第一次被計算的步"},
    "label.7.2 (f) tokens a slot wasted": {"en": "7.2 (f) tokens a slot wasted",
                                           "zh-TW": "7.2 (f) 一個位子浪費的 token"},
    "label.7.2 (g) where continuous batching pays": {"en": "7.2 (g) where continuous batching pays",
                                                     "zh-TW": "7.2 (g) 連續批次從哪裡開始划算"},
    "label.7.3 (h) token-budget chunker": {"en": "7.3 (h) token-budget chunker",
                                           "zh-TW": "7.3 (h) 按 token 預算切 chunk"},
    "label.7.3 (i) chunked prefill policy": {"en": "7.3 (i) chunked prefill policy",
                                             "zh-TW": "7.3 (i) chunked prefill 策略"},
    "label.7.3 (j) choose a chunk length": {"en": "7.3 (j) choose a chunk length", "zh-TW": "7.3 (j) 選 chunk 長度"},
    "label.7.3 (k) a chunk length for a service": {"en": "7.3 (k) a chunk length for a service",
                                                   "zh-TW": "7.3 (k) 替一個服務選 chunk 長度"},
    "label.7.4 (l) slabs that fit": {"en": "7.4 (l) slabs that fit", "zh-TW": "7.4 (l) 放得下幾段 slab"},
    "label.7.4 (m) KV bytes a sequence holds": {"en": "7.4 (m) KV bytes a sequence holds",
                                                "zh-TW": "7.4 (m) 一個序列占的 KV 位元組"},
    "label.7.4 (n) slab allocator": {"en": "7.4 (n) slab allocator", "zh-TW": "7.4 (n) slab 配置器"},
    # ----------------------------------------------------------------------------- grader: results, reasons
    "not_utf8": {
        "en": "not a notebook: the file is not UTF-8 text",
        "zh-TW": "不是 notebook：這個檔案不是 UTF-8 文字"},
    "bad_json": {
        "en": "not a notebook: invalid JSON ({msg} at line {line}, column {col}; a truncated file?)",
        "zh-TW": "不是 notebook：JSON 格式錯誤（第 {line} 行第 {col} 欄：{msg}；檔案被截斷了嗎？）"},
    "no_cells": {
        "en": "not a notebook: valid JSON, but not a Jupyter notebook (no list of cells)",
        "zh-TW": "不是 notebook：JSON 沒問題，但不是 Jupyter notebook（沒有儲存格清單）"},
    "bad_schema": {
        "en": "not a valid notebook: {err}",
        "zh-TW": "不是有效的 notebook：{err}"},
    "unreadable": {
        "en": "cannot read the file ({err})",
        "zh-TW": "無法讀取檔案（{err}）"},
    "other_assignment": {
        "en": "not one of this assignment's notebooks (none of its check cells are there)",
        "zh-TW": "不是這份作業的 notebook（找不到任何一個檢查儲存格）"},
    "other_language": {
        "en": "written for a {lang} kernel ({kernel}); these exercises are Python",
        "zh-TW": "這是給 {lang} kernel（{kernel}）的 notebook；這些練習用的是 Python"},
    "no_files": {
        "en": "no files submitted",
        "zh-TW": "沒有繳交任何檔案"},
    "not_run": {
        "en": "the check did not run",
        "zh-TW": "這項檢查沒有執行"},
    "cpu_limit": {
        "en": "stopped: the notebook used its {limit:g} CPU seconds (an endless loop?)",
        "zh-TW": "已中止：notebook 用完了它的 {limit:g} 秒 CPU 時間（無窮迴圈？）"},
    "cell_cpu_limit": {
        "en": "the cell used its {limit:g} CPU seconds and was stopped (an endless loop?)",
        "zh-TW": "這個儲存格用完了它的 {limit:g} 秒 CPU 時間，已被中止（無窮迴圈？）"},
    "wall_limit": {
        "en": "stopped: the notebook ran {limit:g} s of wall-clock time without finishing (sleeping or blocked?)",
        "zh-TW": "已中止：notebook 跑了 {limit:g} 秒（實際時間）還沒結束（在 sleep 或卡住了？）"},
    "memory_limit": {
        "en": "the notebook ran out of its {gib:g} GiB of memory",
        "zh-TW": "notebook 用光了它的 {gib:g} GiB 記憶體"},
    "killed": {
        "en": "the notebook's process was killed ({how}) before this check ran",
        "zh-TW": "這項檢查執行前，notebook 的行程就被終止了（{how}）"},
    "exit_status": {
        "en": "exit status {rc}",
        "zh-TW": "結束代碼 {rc}"},
    "disarms": {
        "en": "the submission disarms the checks: {why}",
        "zh-TW": "這份作業讓檢查失效：{why}"},
    "delegates": {
        "en": "the answer hands the work to the library ({what} in cell {cell}); write it yourself",
        "zh-TW": "答案把工作交給了函式庫（第 {cell} 個儲存格的 {what}）；請自己寫"},
    "its_check": {
        "en": " [its check: {msg}]",
        "zh-TW": "［它的檢查：{msg}］"},
    "changed_package": {
        "en": "the submission changed the tinyserve package's files; its checks cannot be trusted (the other "
              "submissions were graded against a clean copy)",
        "zh-TW": "這份作業改動了 tinyserve 套件的檔案，它的檢查結果無法採信（其他作業都是用乾淨的副本評分）"},
    "grader_error": {
        "en": "grader error: {exc}: {err}",
        "zh-TW": "評分程式出錯：{exc}: {err}"},
    "student_line": {
        "en": "{student}: {points:g}/{max_points:g} points, {passed}/{total} answers passed",
        "zh-TW": "{student}：{points:g}/{max_points:g} 分，{total} 題通過 {passed} 題"},
    "student_more": {
        "en": " ({parts})",
        "zh-TW": "（{parts}）"},
    "clause_sep": {
        "en": "; ",
        "zh-TW": "；"},
    "list_sep": {
        "en": ", ",
        "zh-TW": "，"},
    "n_not_submitted": {
        "en": "{n} not submitted",
        "zh-TW": "{n} 題未繳交"},
    "n_failed": {
        "en": "{n} failed",
        "zh-TW": "{n} 題未通過"},
    "n_blank": {
        "en": "{n} not attempted",
        "zh-TW": "{n} 題未作答"},
    "n_integrity": {
        "en": "{n} not counted (integrity)",
        "zh-TW": "{n} 題不計分（誠信檢查）"},
    "n_invalid": {
        "en": "{n} file(s) not gradable",
        "zh-TW": "{n} 個檔案無法評分"},
    "n_manual": {
        "en": "{n} open answer(s) for you to grade",
        "zh-TW": "{n} 題開放題等你評分"},
    "graded_in": {
        "en": "  {student}/{file}: graded in {s:.1f} s",
        "zh-TW": "  {student}/{file}：評分花了 {s:.1f} 秒"},
    "scan_cell": {
        "en": "code cell {k} {why}",
        "zh-TW": "第 {k} 個程式碼儲存格{why}"},
    "flag_integrity": {
        "en": "integrity: {label}",
        "zh-TW": "誠信檢查：{label}"},
    "flag_invalid": {
        "en": "invalid file {file}: {why}",
        "zh-TW": "無效的檔案 {file}：{why}"},
    "flag_limit": {
        "en": "limit: {file}: {why}",
        "zh-TW": "超出限制：{file}：{why}"},
    "manual_row": {
        "en": "open answer: grade it by its rubric (chapters/solutions)",
        "zh-TW": "開放題：請依評分標準評分（chapters/solutions）"},
    "wrote_tables": {
        "en": "score table: {out} (one row per student); answers: {details} ({n} rows)",
        "zh-TW": "成績表：{out}（每位學生一列）；逐題結果：{details}（{n} 列）"},
    "no_references": {
        "en": "grade: no reference notebooks in {path}",
        "zh-TW": "grade：{path} 裡沒有參考解答 notebook"},
    "no_students": {
        "en": "grade: no student folders in {path}",
        "zh-TW": "grade：{path} 裡沒有學生資料夾"},
    "not_a_folder": {
        "en": "grade: {path} is not a folder",
        "zh-TW": "grade：{path} 不是資料夾"},
    "warn_root": {
        "en": "grade: warning: this Python is installed where other users cannot read it, so submissions "
              "run as root: the package copy each imports is checked after every notebook (a change is "
              "zero for it) rather than protected; grade inside a container for that",
        "zh-TW": "grade：警告：這個 Python 裝在其他使用者讀不到的地方，所以作業會以 root 身分執行：每份作業 import "
                 "的套件副本只會在它跑完後檢查（被改動就給零分），而不是事先保護；要有保護，請在容器裡評分"},
    "warn_nproc": {
        "en": "grade: warning: no writable cgroup and no unprivileged user to run as, so the process "
              "limit is RLIMIT_NPROC of your own user (shared by all your processes, nothing for root); "
              "grade inside a container for a real limit",
        "zh-TW": "grade：警告：沒有可寫入的 cgroup，也沒有可切換的非特權使用者，所以行程數上限只是你自己帳號的 "
                 "RLIMIT_NPROC（你所有的行程共用，對 root 無效）；要有真正的上限，請在容器裡評分"},
    # what the scan found in a student's own lines (after "code cell k")
    "scan.rebinds": {
        "en": "rebinds AssertionError",
        "zh-TW": "重新指定了 AssertionError"},
    "scan.builtins": {
        "en": "touches builtins",
        "zh-TW": "動了 builtins"},
    "scan.handler": {
        "en": "installs an exception handler",
        "zh-TW": "裝了例外處理器"},
    "scan.imports": {
        "en": "manipulates imports",
        "zh-TW": "操弄 import 機制"},
    "scan.checker": {
        "en": "touches the checker (tinyserve.classroom)",
        "zh-TW": "動了檢查程式（tinyserve.classroom）"},
    "scan.exec": {
        "en": "runs generated code or reaches for source files",
        "zh-TW": "執行動態產生的程式碼，或去讀原始碼檔案"},
    "scan.processes": {
        "en": "starts processes",
        "zh-TW": "啟動了行程"},
    "scan.frames": {
        "en": "inspects the checker's frames or objects",
        "zh-TW": "窺探檢查程式的 frame 或物件"},
    "scan.setattr": {
        "en": "patches objects with setattr/delattr",
        "zh-TW": "用 setattr/delattr 改動物件"},
    "scan.engine": {
        "en": "patches the engine",
        "zh-TW": "改動了引擎"},
    "scan.channels": {
        "en": "writes to the grader's channels",
        "zh-TW": "寫入評分程式的通訊管道"},
}

WORDS: dict[str, dict[str, str]] = {f"classroom.{k}": v for k, v in _W.items()}
