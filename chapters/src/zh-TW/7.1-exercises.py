# %% [markdown]
# # 練習 7.1：靜態批次與動態批次
#
# Padding、最快完成者，以及決定批次何時發車的排程器：三道題，每一道都拿引擎實際算出來的結果來檢查。
#
# **怎麼做。** 每一題都先請你*預測*（在執行任何東西之前，把你的猜測寫下來），再到會丟出
# `NotImplementedError("write your answer here")` 的儲存格裡用程式*推導*出答案，最後*檢查*：答案下方的檢查儲存格
# 會在真正的引擎上、用當下新抽的工作負載跑你的答案，錯在哪裡會用文字告訴你。檢查儲存格要計分：改了也沒用，
# 評分程式會把原本的放回去。最後一個儲存格會一次檢查你所有的答案；也可以在終端機執行（先存檔）：
# `python -m tinyserve.classroom.check chapters/zh-TW/exercises/7.1-exercises.ipynb`。

# %% [markdown]
# ## (a) Padding
#
# 靜態批次用一次前向傳遞，對一個 token 排成的長方形 prefill 整個批次：每個請求占一列。
#
# **預測。** 一個靜態批次裡有一段 50 個 token 和一段 4,000 個 token 的提示詞。它的 prefill 會算多少個 padding
# token？在執行任何東西之前，先把你的猜測寫進下一個儲存格。

# %% [markdown]
# **推導。** 引擎會在 trace 裡記下每次 prefill 的 `padding`。跑幾個小批次看看
# （改一改長度，再跑一次）：

# %% [markdown]
# 寫出 `padding_tokens(prompt_lens)`：一個批次的提示詞長度是這些時，一次靜態 prefill 會算多少個 padding token。
# 動手寫公式之前，先跟自己解釋清楚：*為什麼*每一列會得到那麼多 padding？
#
# **提示。** 長方形的寬度由什麼決定？每段提示詞又填滿了自己那一列的多少？

# %% [markdown]
# **對照你的預測**，看看你的函式和引擎怎麼說：

# %% [markdown]
# ## (b) 最快完成者
#
# 請求依這個順序一起到達，靜態批次每 `batch_size` 個一批來跑（最後一批可能比較小）。一個批次會一直 decode，
# 直到最長的輸出完成；比較早完成的成員仍占著位子，每一步都算出一個會被丟掉的 token。
#
# **預測。** 本章的那個批次：一個請求產出 2,000 個 token，31 個各產出 20 個，批次大小 32。這個批次算出的 decode
# token 中，被丟掉的占多少比例？只看*那 31 個短請求的位子*，它們的 decode 步驟又有多少比例被浪費？兩者是同一個
# 數字嗎？把兩個猜測都寫下來。

# %% [markdown]
# **推導。** 先在一個小例子上用手算（輸出 `[4, 2]`，批次大小 2：這個批次跑了幾個 decode 步驟？對每個位子來說，
# 哪幾步是有用的？）；如果不確定每個請求的*第一個* token 從哪裡來，再看看引擎對同一個例子的 `trace.steps`。
#
# 寫出 `wasted_fraction(output_lens, batch_size)`：被丟掉的 decode token 除以**所有**算過的 decode token，
# 涵蓋每一個批次的每一個位子（完全沒有 decode 時回傳 0.0）。
#
# **提示。** 一次算一個批次；你手算的小例子會告訴你一個批次跑幾個 decode 步驟。

# %% [markdown]
# **對照你的預測。** 引擎兩個比例都會給：32 個位子全部算進去（也就是你的函式算的），以及只看 31 個短請求的位子
# （7.1 notebook 裡的那個數字）。為什麼長請求的那個位子對分母的影響，比你可能以為的小得多？

# %% [markdown]
# ## (c) 把動態批次寫成一個策略
#
# 現在來寫排程器本身。動態批次就是靜態批次，只是批次在這幾種時候發車：批次滿了，**或**等最久的請求已經等了
# `timeout` 秒，**或**不會再有請求到達（`more_coming` 是 False）。批次跑起來之後誰都不能加入；它會占著所有位子，
# 直到最後一個成員完成（這部分已經替你寫好了：它的 `finished` 覆寫了繼承來的那一個）。
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
# 把發車規則補上：要嘛等（回傳 `Plan([], wake_s=...)`：引擎最晚什麼時候得再來問你？），要嘛取出最多 `batch_size`
# 個等待中的請求（最早到的先），各給一個位子，回傳它們的 prefill，每一個都 padding 到批次裡最長的提示詞。檢查會在
# 真正的模型上，把你的類別和內建的動態策略並排跑在新抽的工作負載上，逐步比較。想看你的策略跑起來的樣子，在你自己的
# 儲存格裡執行：
# `tinyserve.run("chapter-7.1-finisher", MyDynamic(batch_size=8, timeout=0.05), dry_run=True).metrics()`
# （dry run：不跑模型、只跑排程與成本模型，時間由成本模型推算；每次執行都要用一個新的策略物件）。
#
# **提示。** 發車的理由有三個；三個都不成立時，引擎必須知道什麼時候再來問你。
