# %% [markdown]
# # 練習 7.4：KV 快取限制了批次
#
# 一塊記憶體放得下幾段 slab、一個序列實際占了多少，還有一個絕不承諾自己沒有的記憶體的配置器。
#
# **怎麼做。** 每一題都先請你*預測*（在執行任何東西之前，把你的猜測寫下來），再到會丟出
# `NotImplementedError("write your answer here")` 的儲存格裡用程式*推導*出答案，最後*檢查*：答案下方的檢查儲存格
# 會在真正的引擎上、用當下新抽的工作負載跑你的答案，錯在哪裡會用文字告訴你。檢查儲存格要計分：改了也沒用，
# 評分程式會把原本的放回去。最後一個儲存格會一次檢查你所有的答案；也可以在終端機執行（先存檔）：
# `python -m tinyserve.classroom.check chapters/zh-TW/exercises/7.4-exercises.ipynb`。

# %% [markdown]
# ## (l) 算出 KV slab 的數量
#
# 序列持有的每一個 token，都在每一層留著一個 key 向量和一個 value 向量：共 `bytes_per_token` 位元組。引擎給每個
# 位子一段 slab，預留 `max_len` 個位置，不管用不用得到。
#
# **預測。** 1,000,000 位元組的 KV 記憶體、`max_len` = 100 個位置、每個位置 1,024 位元組：有幾個位子？
# 換成 1,024,000 位元組，會多出一個嗎？
#
# 寫出 `slabs_that_fit(memory_bytes, max_len, bytes_per_token)`：這麼多 KV 記憶體放得下幾個位子。
#
# **提示。** 一段 slab 可以由兩個位子共用，或拆給兩個位子嗎？

# %% [markdown]
# ## (m) 一個序列實際占了多少
#
# slab 預留的是上限；一個序列實際持有的比較少。
#
# **預測。** 一段 10 個 token 的提示詞，已經產出 1 個 token：快取替它存了幾個位置的 K 和 V？想一想每個位置的 K/V
# 是*什麼時候*寫進去的：在 prefill 時，還是在哪一個 decode 步驟？
#
# 寫出 `kv_bytes_used(prompt_len, generated, bytes_per_token)`：一個序列產出 `generated >= 1` 個 token 之後持有的
# KV 位元組數。如果你的預測和推導對不上，就讓引擎一步一步跑（`run = engine.start(...)`、`run.step()`）看看。
#
# **提示。** 第一個產出的 token 是從哪裡來的？它已經被餵回模型了嗎？

# %% [markdown]
# ## (n) 放不下就拒絕的 slab 配置器
#
# 引擎的位子池把 KV 記憶體切成一段段 `max_len` 個位置的 slab，最多 `batch_size` 段。把它寫出來：
# `MySlabs(memory_bytes, max_len, bytes_per_token, batch_size)`，成員如下
#
# | 成員 | 意思 |
# |---|---|
# | `num_slots` | 總共有幾段 slab |
# | `num_free` | 現在有幾段是空的（屬性或 property 都可以） |
# | `claim()` | 編號最小的空位子；每段 slab 都被占用時回傳 `None`：**拒絕**，絕不承諾不存在的記憶體 |
# | `release(slot)` | 把位子還回去；還一個沒被占用的位子要丟出 `ValueError` |
# | `held_bytes()` | 執行中請求占用的 slab 共多少位元組（引擎的位子池一開始就預留了每一段 slab；這是其中正在用的部分） |
#
# **預測。** 為什麼要從編號最小的開始給？（看看 7.2 notebook 裡的位子時間軸。）
#
# 檢查會在 `kv_budget` 限制下跑真正的連續批次，把排程器做的每一次 `claim`、`release` 和 `num_free` 都在你的配置器上
# 重做一遍，逐步拿你的回答和引擎的位子池比較；引擎的位子池滿了的時候，還會再向你的配置器多要一個位子。
#
# **提示。** `num_slots` 由兩個限制決定；把空位子存成能讓編號最小的先出來的樣子。

# %% [markdown]
# 在引擎上比較 slab 和剛好夠用的配置：一次執行替每個位子預留一整段 slab，但實際只占用它的序列寫進去的部分。兩個峰值
# 之間的差距，就是第 8 章用實體區塊和 page table 管理 KV 快取時要贏回來的空間。
