# %% [markdown]
# # 練習 7.2：連續批次
#
# 兩個每一步都重新決定批次的排程器、一份要讀懂的 trace，還有一道開放題。
#
# **怎麼做。** 每一題都先請你*預測*（在執行任何東西之前，把你的猜測寫下來），再到會丟出
# `NotImplementedError("write your answer here")` 的儲存格裡用程式*推導*出答案，最後*檢查*：答案下方的檢查儲存格
# 會在真正的引擎上、用當下新抽的工作負載跑你的答案，錯在哪裡會用文字告訴你。檢查儲存格要計分：改了也沒用，
# 評分程式會把原本的放回去。最後一個儲存格會一次檢查你所有的答案；也可以在終端機執行（先存檔）：
# `python -m tinyserve.classroom.check chapters/zh-TW/exercises/7.2-exercises.ipynb`。

# %% [markdown]
# ## (d) 連續批次的一步
#
# 連續批次每一步都重新決定批次：完成的請求立刻離開它的位子，等待中的請求在緊接著的下一步就補進空出來的位子。
# 寫出 `plan`：每個提示詞已經 prefill 完的執行中請求做 decode；接著等待中的請求進入空位子（最早到的先，條件是
# `len(self.running) < self.batch_size`），並在同一步 prefill 整段提示詞。`finished` 不用你寫：繼承來的那一個已經會
# 把完成的請求移出 `self.running` 並釋放它的位子，這正是連續批次需要的（對照 (c)：那裡的批次必須一直占著位子）。
# 想看你的策略跑起來的樣子：`tinyserve.run("chapter-7.2-longtail", MyContinuous(8), dtype="float64",
# workload_knobs={"n": 20})`（每次執行都用一個新的策略物件）。
#
# **策略介面**（內建策略實作的就是這一套）。每一步，引擎都會問你的策略要算什麼：
#
# | 你要寫的 | 意思 |
# |---|---|
# | `plan(now, more_coming) -> Plan(works, wake_s=None)` | 這一步的 works；`Plan([])` 加上 `wake_s` 表示「到 `wake_s` 再來問我」（引擎會直接跳到下一次到達或 `wake_s`） |
# | `finished(req)` | `req` 完成時呼叫。繼承自 `Policy`：把 `req` 移出 `self.running`，並釋放它的位子。只有當你的策略占用位子的方式不一樣時才需要覆寫 |
#
# 基底類別 `Policy` 替你保管：`self.waiting`（已到達、還沒有位子的請求組成的 deque，最早到的在前面）、
# `self.running`（占著位子的請求，依進場順序）、`self.pool`（位子們：`num_free`；`claim()` 拿走編號最小的空位子，
# `release(slot)` 把位子還回去）、`self.batch_size`。
# 讓一個請求進場：`req.slot = self.pool.claim(); self.running.append(req)`。
#
# 一個 `Work(slot, req, phase, start, tokens, padding=0)` 就是一個位子在這一步要算的東西：
# `"prefill"` 提示詞位置 `start .. start+tokens-1`（再加上 `padding` 個會被丟掉的 token）、`"decode"`
# （用 `decode_work(req)`：一個已經 prefill 完的請求的下一個 token），或 `"wasted"`（已完成請求的位子算出一個會被
# 丟掉的 token）。請求上用得到的欄位：`id`、`arrival_s`、`prompt_len`、`num_prefilled`、`output_len`、`done`、
# `slot`。引擎會在這些 works 上跑模型、推進各個請求，並對每個完成的請求呼叫 `finished`。
#
# **提示。** 這一步誰可以 decode？誰得先 prefill？決定這兩件事的先後順序。

# %% [markdown]
# ## (e) decode 優先，但有上限
#
# 你在 (d) 寫的是 *prefill 優先*：新到者的整段提示詞在下一步就加入，所有正在 decode 的請求都得陪著等那個很長的一步。
# *decode 優先*的伺服器（TGI 的 router）則讓新到者等著、繼續 decode，但不會讓它們永遠等下去：只要累積了
# `max_waiting_steps` 個「新到者其實進得來」的 decode 步驟（有人在等、有空位子、執行中的少於 `batch_size`），
# 就讓等待中的請求進場（最早到的先），然後重新計數。沒有任何序列在 decode 時，等待中的請求立刻進場。
#
# **預測。** `max_waiting_steps = 3`，一個請求在另外四個正在 decode 時到達：它的 prefill 最早在幾步之後被計算？
# 沒有空位子的時候，計數又會怎樣？
#
# 寫出 `MyDecodeFirst(batch_size, max_waiting_steps)`。檢查會把它和引擎裡設了同樣上限的 `continuous` 策略逐步比較。
#
# **提示。** 先決定這一步要不要讓人進場；只有新到者*能夠*進來的那些步才算數。

# %% [markdown]
# ## (f) 讀懂一份 trace
#
# 一次執行的 `Trace` 記下了每一步：`trace.steps[k].works` 列出第 `k` 步裡每個位子做了什麼，格式是
# `SlotWork(slot, request_id, phase, start, tokens, padding)`，其中 `phase` 是 `prefill`、`decode`、`wasted`
# 三者之一。下面這一份來自批次大小 2 的靜態批次：

# %% [markdown]
# **預測。** 在上面印出的四步裡，哪個位子丟掉的 token 比較多？是在哪個階段丟掉的？一個請求第一次*被計算*的那一步，
# 和讓它拿到第一個 token 的那一步，是同一步嗎？
#
# 寫出 `first_step(trace, request_id)`：第一次替那個請求算了任何東西的那一步的編號；以及 `slot_waste(trace, slot)`：
# 那個位子在整次執行中算了又丟掉的 token 有多少個。檢查會用幾種策略當場產生的 trace。
#
# **提示。** `first_step`：一步裡的什麼資訊說明了它算了哪些請求？`slot_waste`：有兩種工作會被丟掉；
# 你上面的預測應該兩種都找到了。

# %% [markdown]
# ## (g) 開放題：連續批次從哪裡開始划算？
#
# 到達率低的時候，每個策略幾乎都是一次服務一個請求；到達率高的時候，靜態批次的每一組會被塞滿，浪費也跟著變多。
# 用 `chapter-7.2-longtail`（dry run：用預設硬體的成本模型推算時間，每次幾秒鐘），在相同的 `batch_size` 下，
# 對一系列 `rate`（`workload_knobs={"n": 200, "rate": r}`）分別跑 `dynamic` 和 `continuous`，找出連續批次的優勢
# 開始變大的負載。在你自己的程式碼儲存格裡呈現這次掃描（表格或圖表），然後在下面用幾句話回答：你用**哪個指標**判斷、
# 為什麼；優勢從**哪個到達率**開始；以及讓它從那裡開始的**機制**（trace 裡有什麼改變了）。由老師依評分標準人工評分。

# %% [markdown]
# **評分標準（3 分；這是老師的版本，學生看到的是空白的作答儲存格）。**
#
# * **1 分：一次看得出結果的掃描。** 至少五個到達率，從低負載（每隔幾秒才一個請求：兩種策略的 p50 TTFT／端到端延遲
#   幾乎相同）一路到過載（佇列無限制地變長）；兩種策略用相同的 `batch_size` 和種子、成本模型推算的時間（dry run），
#   並有每個到達率下該指標的表格或圖表。
# * **1 分：選對指標，並說明理由。** 一個包含排隊時間的延遲指標（p90／p99 端到端延遲或 TTFT），或是在固定延遲目標下的
#   輸出吞吐量；*不能*只看位子利用率（連續批次在任何負載下都贏），也不能看兩種策略都跟得上的到達率下的平均吞吐量
#   （兩者必然相等：它們服務的是同樣的到達）。要拿滿分，得說出所選的指標為什麼會在兩種策略之間拉開差距。
# * **1 分：機制。** 優勢從請求開始*排隊*等在一組執行中的靜態批次後面時出現：一旦某組批次存活期間（由它最長的輸出
#   決定）的到達量超過一組吸收得了的量，動態批次的佇列就不斷變長，而連續批次一有位子空出來就補上。好的答案會從 trace
#   讀出這件事（第一步之前的等待時間、每一步浪費的 decode token、閒置的位子），並說出找到的到達率，大約是
#   `batch_size / (一組批次的平均服務時間)`；確切數字取決於種子和批次大小，所以只要和學生自己的掃描結果一致，
#   任何到達率都接受。
