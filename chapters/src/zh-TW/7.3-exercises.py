# %% [markdown]
# # 練習 7.3：chunked prefill
#
# 一個分配 token 預算的 chunk 切分器、包住它的 chunked 排程器，以及怎麼選 chunk 長度。
#
# **怎麼做。** 每一題都先請你*預測*（在執行任何東西之前，把你的猜測寫下來），再到會丟出
# `NotImplementedError("write your answer here")` 的儲存格裡用程式*推導*出答案，最後*檢查*：答案下方的檢查儲存格
# 會在真正的引擎上、用當下新抽的工作負載跑你的答案，錯在哪裡會用文字告訴你。檢查儲存格要計分：改了也沒用，
# 評分程式會把原本的放回去。最後一個儲存格會一次檢查你所有的答案；也可以在終端機執行（先存檔）：
# `python -m tinyserve.classroom.check chapters/zh-TW/exercises/7.3-exercises.ipynb`。

# %% [markdown]
# ## (h) 按 token 預算切 chunk
#
# Chunked prefill 給每一步一份 token 預算 `max_batch_tokens`。已經 prefill 完的執行中請求先 decode（每個一個
# token），進行中的使用者因此永遠不會卡住；預算剩下的部分**依進場順序**分給還在 prefill 的提示詞，每個最多
# `chunk_size` 個 token，各自從上次 prefill 停下的地方接著做。
#
# **預測。** 預算 16、chunk 大小 8、三個 decode，還有兩段提示詞在 prefill：一段 20 個 token、已做完 14 個，
# 另一段 30 個 token、一個都還沒做。這一步各分到幾個 token？
#
# 寫出 `plan_chunks(prefilling, decodes, chunk_size, max_batch_tokens)`：`prefilling` 是依進場順序排列的
# `(prompt_len, num_prefilled)` list；回傳每一段在這一步分到幾個提示詞 token（一個等長的 list；沒分到的填 0）。
# 檢查會在新抽的工作負載上跑引擎的 chunked 策略，並在**每一步**問你的函式會怎麼分。
#
# **提示。** 每個請求的 chunk 受三個限制；往清單下面走的時候，其中哪一個會變？

# %% [markdown]
# ## (i) chunked prefill 策略
#
# 現在寫完整的一步。每一步：先讓等待中的請求進入空位子（最早到的先，最多到 `batch_size`）；接著每個提示詞已經
# prefill 完的執行中請求做 decode；最後剩下的預算分給 prefill 的 chunk：用你的 `plan_chunks`。想看你的策略跑起來
# 的樣子：`tinyserve.run("chapter-7.3-long-prompt", MyChunked(32, 512, 544), dry_run=True)`（dry run：不跑模型，
# 時間由成本模型推算；每次執行都用一個新的策略物件）。
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
# **提示。** 先進場，再 decode，最後切 chunk；0 個 token 的 chunk 不算一份 Work。

# %% [markdown]
# ## (j) 選 chunk 長度
#
# 一段很長的提示詞在十來個請求正在 decode 時到達。下面的函式 `measure(chunk)` 會在引擎上跑這個情境（用預設硬體的
# 成本模型推算時間），回傳 `(正在 decode 的請求中最差的 token 間隔 ms, 新到者的 TTFT ms)`。
#
# 執行之前先**預測**：chunk 從 64 個 token 長到 2,048 個時，這兩個數字各往哪個方向走？其中有沒有哪一個到某處就
# 不動了？為什麼？

# %% [markdown]
# 寫出 `pick_chunk(measure, candidates, itl_target_ms, ttft_target_ms)`：最差間隔不超過 `itl_target_ms`、TTFT
# 也不超過 `ttft_target_ms` 的候選 chunk 中最大的那一個；沒有候選同時達到兩個目標時回傳 `None`。檢查每次都會重新
# 抽情境和目標。
#
# **提示。** 你的預測會告訴你，符合各個目標的候選是不是連成一段範圍；但別依賴這一點。

# %% [markdown]
# ## (k) 開放題：替一個服務選 chunk 長度
#
# 你的服務向使用者保證，token 之間最差的間隔是 **50 ms**（在預設硬體上由成本模型推算），而長文件會不斷進來。替
# `chapter-7.3-long-prompt` 選一個 chunk 長度，並在你自己的程式碼儲存格裡用自己的掃描（各種 chunk 長度，以及搭配
# 每一個的 `max_batch_tokens`）支持你的選擇。然後在下面回答：**你選的 chunk**、**證據**（你的選擇和它相鄰長度的
# 最差間隔與新到者 TTFT），以及不選更大的 chunk，你**放棄了什麼**。由老師依評分標準人工評分。

# %% [markdown]
# **評分標準（3 分；這是老師的版本，學生看到的是空白的作答儲存格）。**
#
# * **1 分：一次定得出答案的掃描。** 答案兩側都有好幾個 chunk 長度（例如 64 … 2,048），`max_batch_tokens` =
#   chunk + 批次大小（或另一個說清楚、一致套用的規則），每一個都要有已在 decode 的請求的最差 token 間隔，*以及*
#   長提示詞的 TTFT，兩者都從 trace 讀出（`token_times`、`first_token_s - arrival_s`），不是從公式算出來。
# * **1 分：由掃描推出的選擇。** 最差間隔不超過 50 ms 的實測 chunk 中最大的那一個；違反目標的選擇，或沒說明理由
#   就選了比較小的 chunk（例如替更長的批次留餘裕），這一分就拿不到。列出相鄰長度的結果，才看得出它是最大的。
# * **1 分：把代價講清楚。** chunk 越小，提示詞就分散到越多步，新到者的 TTFT 跟著變長（大約是「提示詞長度／chunk」
#   步，每一步至少和一個 decode 步驟一樣長）；而且每一步都得再付一次固定的每步成本（每一步都要串流一次權重），
#   prefill 的吞吐量因此下降。好的答案會指出：過了某個點之後，chunk 再大 TTFT 也不會再改善，因為提示詞本身的運算
#   成了主角；也會指出間隔目標是由 decode 們共用的那個最大的一步決定的。
