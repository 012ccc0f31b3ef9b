# %% [markdown]
# # 7.5 附錄：你看過的那些圖，在真實引擎上跑一遍
#
# 部落格文章、官方文件和論文談批次處理時，通常各畫一張圖就打住。這篇附錄挑出其中五張，把每一張寫成一個工作負載檔（`chapters/workloads/gallery-*.jsonl`），交給 `tinyserve` 執行，再讓你一步一步看引擎實際做了什麼。我們的策略和圖中系統的規則不一樣的地方，會明確說出差在哪裡，並把差異畫給你看。接著是這些論文用來比較排程器的掃描實驗：延遲目標下的容量、消融實驗（ablation），以及延遲分布。
#
# 下面的描述是我們自己的話，不是作者的原文；原作請看連結。每次執行都是 dry run（不跑模型、只跑排程與成本模型），輸出長度固定，時間由成本模型推算（一張 H200 上的 70B 級模型），所以這裡印出的每個數量和時間，在任何機器上都一樣。

# %% [markdown]
# ## 1. Anyscale："How continuous batching enables 23x throughput in LLM inference"
#
# *Cade Daniel, Chen Shen, Eric Liang, Richard Liaw, Anyscale blog, June 2023.*
# <https://www.anyscale.com/blog/continuous-batching-llm-inference>
#
# **圖裡畫了什麼。** 一張格子圖：四個序列各佔一列，每一欄是一次迭代。靜態批次下，第三個序列兩次迭代就完成了，它那一列卻一直被保留著，直到最慢的第二個序列在第六次迭代結束。連續批次下，同一張格子始終是滿的：前面的序列一完成，另外三個序列（S5 到 S7）就立刻補進空出來的列。
#
# **我們的情境**（`gallery-anyscale-grid.jsonl`）：S1 到 S4 分別輸出 5、6、2、4 個 token（和圖一樣，S3 在 2 個之後結束、S2 在 6 個之後；S1 和 S4 的長度是我們選的），S5 到 S7 在佇列裡等。迭代 1 是 prefill，它同時產出每個序列的第一個 token。
#
# **預測。** 用靜態批次、4 個位子時，引擎會替已經完成的序列算出幾個 decode token？

# %% [markdown]
# 在靜態批次那次執行裡，迭代 3 到 6 的 `S3:w` 就是圖中閒置的那一列：引擎真的在那裡算出一個 token，然後丟掉。（七個請求、四個位子，靜態批次還會把 S5 到 S7 當成第二批的三個請求，在迭代 7 到 9 執行。）連續批次下，S5 在迭代 3 進入 S3 的位子，S6 在迭代 5 接手 S4 的位子，S7 在迭代 6 接手 S1 的。和原圖有一點不同：原圖把提示詞也畫成格子裡的 token，我們的迭代 1 則是用一次前向傳遞算完整段提示詞，在靜態批次下還用 padding 補齊到最長的那一段（`+pad`）。
#
# 用游標一步一步看這兩次執行（按 Play，或拖動步驟滑桿；widget 的步驟從 0 算起，所以迭代 *n* 就是步驟 *n* − 1）。下面的圖和內文一樣，迭代從 1 開始編號。

# %% [markdown]
# ## 2. Orca, Figure 3：已經完成的請求還在被計算
#
# *Gyeong-In Yu et al., "Orca: A Distributed Serving System for Transformer-Based Generative Models", OSDI 2022.*
#
# **圖裡畫了什麼。** 兩個提示詞一樣長的請求組成一個批次一起跑。第二個請求在迭代 2 就吐出結束 token，但因為整個批次是以一個單位排程的，引擎在迭代 3 和 4 仍然繼續餵它假的輸入，直到第一個請求完成；算出來的結果沒有人用得上。
#
# **我們的情境**（`gallery-orca-early-finish.jsonl`）：x1 和 x2，提示詞各 2 個 token；x1 產出 4 個 token，x2 產出 2 個。
#
# **預測。** 整批一起排程時，x2 完成之後，引擎還會替它算幾個 token？

# %% [markdown]
# 規則和原圖一樣：我們的靜態策略讓已完成成員的位子繼續計算（`x2:w`），直到整批結束。Orca 的解法是迭代級排程，也就是我們的連續策略：x2 在迭代 2 之後就離開了。

# %% [markdown]
# ## 3. TensorRT-LLM："Tuning Max Batch Size and Max Num Tokens"
#
# *NVIDIA TensorRT-LLM documentation, performance tuning guide.*
# <https://nvidia.github.io/TensorRT-LLM/performance/performance-tuning-guide/tuning-max-batch-size-and-max-num-tokens.html>
#
# **這幾張圖畫了什麼。** 一個玩具排程器，最多容納 4 個請求，每次迭代最多 12 個 token。一張一張看：兩段 5 個 token 的提示詞用掉 12 個 token 裡的 10 個，下一段提示詞就排不進去（被 *token 預算* 擋下）；下一次迭代，這兩個請求各只需要一個 token，於是又有兩段提示詞開始，而第五個請求明明還有 token 額度，卻被 *批次上限* 擋下；接著第一個請求完成、被逐出，第五個請求補上它的位置。最後一張圖示範 context chunking：第三段提示詞切出的第一小段，本來可以用掉第一次迭代剩下的 2 個 token。
#
# **我們的情境**（`gallery-trtllm-budget.jsonl`）：提示詞長 5、5、4、6、3 個 token（頁面只給了前兩個，其餘是我們定的），R1 產出 2 個 token 後停止。
#
# **預測。** 不切 chunk（小段）時，第二次迭代帶了幾個 token（預算 12）？
#
# **一條我們沒有的規則。** 我們的 `chunked` 策略一定會切 chunk。為了在不切 chunk 的情況下重現這幾張圖，我們用 `tinyserve.core.policies.variants` 裡的 `WholePromptBudget`：先排 decode，再依到達順序排新到者，而且只有*整段*提示詞放得進剩下的預算時才排它。

# %% [markdown]
# 第 2 到 4 張圖的情況照樣出現：R3 卡在預算，R5 卡在批次上限，R1 被逐出後 R5 才進來。切 chunk 時，R3 的前 2 個 token 填進了迭代 1 剩下的預算，正如頁面最後一張圖所示意的。還有一點不同：我們的 chunked 策略先分配*位子*，再分配 token，所以 R4 在迭代 1 已經佔著一個位子，卻什麼也沒算（它的提示詞在等預算）；TensorRT-LLM 這時還不會排它。這在這裡不改變任何 token，但正因如此，chunked 那次執行的迭代 1 裡，R5 的原因寫的是「token 預算」。

# %% [markdown]
# ## 4. Sarathi-Serve, Figure 7：四種排程器下的生成停頓
#
# *Amey Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI 2024,
# arXiv:2403.02310 (figure numbers as in the arXiv version).*
#
# **圖裡畫了什麼。** A、B 兩個請求正在生成；一次迭代之後，兩個新請求 C、D 到達。圖中有四條時間軸：vLLM 把新到者的 prefill 放在獨立的迭代裡跑，A、B 只好暫停；Orca 把整段 prefill 和 A、B 的 decode 放進同一次迭代，這次迭代因此變得很長，A、B 一樣得等；FasterTransformer 從不讓 A、B 暫停，卻讓 C、D 一直等到 A、B 離開；Sarathi-Serve 把提示詞切成 chunk，跟著 A、B 的 decode 一起跑，所以沒有人暫停，新到者也很早就開始。
#
# **我們的情境**（`gallery-sarathi-stalls.jsonl`）：A 和 B 的提示詞 32 個 token、輸出 10 個 token；C（1,024 個 token）和 D（1,022 個）在 30 ms 到達，正落在第一次 decode 迭代當中。四種排程器在我們引擎裡的對應：
#
# | 原圖 | 我們的 | 規則 |
# |---|---|---|
# | vLLM | `SeparatePrefill`（tinyserve.core.policies.variants） | 做 prefill 的那一步不帶任何 decode |
# | Orca | `continuous`，prefill 優先 | 整段提示詞和 decode 放在同一步 |
# | FasterTransformer | `static`，批次大小 2 | 執行中的批次結束後，才開始新的批次 |
# | Sarathi-Serve | `chunked`，chunk 512 個 token，預算 514 | 先排每個 decode，再用 chunk 填到預算為止 |
#
# **預測。** 在 Orca 的規則下，A 的兩個 token 之間最長要隔多久（ms）？（一次只有 decode 的迭代大約 20 ms。）

# %% [markdown]
# 對照原圖來讀這四次執行：vLLM 的規則讓 A、B 整整停了一次迭代（「暫停」），它們的間隔是那一步 prefill 再加下一步 decode；Orca 的混合步驟一樣長，所以停頓還在；FasterTransformer 的規則讓 A 的間隔維持在一步 decode，但 C 得等 A、B 全部跑完；chunked prefill 把 A 的間隔壓在一個 514 個 token 的步驟，而且 C 兩步之內就開始了。
#
# **我們的規則和原圖不同的地方。** Sarathi-Serve 的預算計入這一步的每一個 token。我們也是，而且會拿*下一段*提示詞的開頭幾個 token 填滿剩下的額度：預算 514、有三個 decode 時，D 拿到的 chunk 是 511，不是 512。（我們代替 FasterTransformer 的策略會用 padding 把 D 補到和 C 一樣長：`+pad2`。）

# %% [markdown]
# ## 5. vLLM, Figures 2 and 3：替永遠不會出現的 token 保留記憶體
#
# *Woosuk Kwon et al., "Efficient Memory Management for Large Language Model Serving with PagedAttention",
# SOSP 2023.*
#
# **圖裡畫了什麼。** 在 PagedAttention 出現之前，服務系統會替每個請求預留它最長可能用到的 KV 空間。Figure 3 把兩個請求並排畫在記憶體裡：一個最多可能長到 2,048 個位置，另一個長到 512；每份保留空間的大部分目前什麼都沒存（留給未來的 token），有一部分永遠不會用到（請求提早結束），而保留區之間的空隙又小到沒辦法利用。Figure 2 量出這麼做的後果：在它比較的幾個系統裡，KV 記憶體只有大約五分之一到五分之二真正存著 token 的狀態。
#
# **預測。** 迭代 1 剛結束時，保留的 KV 有百分之幾存著 token？
#
# **我們的情境**（`gallery-vllm-reservation.jsonl`）：原圖的兩段提示詞照原文輸入；A 最多長到 2,048 個位置，B 到 512。我們的引擎是*每個位子一段 slab*，也就是本章最後停下來的那種佈局：每個位子從第一步起就保留同樣大的空間，即伺服器的最大長度（這個預設組態是 4,096 個位置）。

# %% [markdown]
# **我們的佈局不同的地方。** 原圖替 A 保留 2,048 個位置、替 B 保留 512 個。我們的 slab 全都一樣大，等於伺服器的最大長度，所以兩個位子都保留 4,096：每份保留空間裡面浪費得更多，但保留區之間沒有空隙，因為一樣大的 slab 永遠放得回彼此的位置。KV 視圖畫出每一步的保留量和使用量；要補上這個落差，靠的是第 8 章的 PagedAttention。

# %% [markdown]
# Figure 2 的量測，換到真實流量上：跑一次 `chapter-7.2-longtail`，保留的 KV 有多少比例存著 token（對時間平均）？跑兩次：一次 slab 和模型的整個上下文一樣長（4,096 個位置，也就是原圖「保留最大值」的系統），一次 slab 和這次執行最長的請求一樣長，而真實的伺服器事先不可能知道這個長度。

# %% [markdown]
# ## 6. 論文用的掃描實驗
#
# ### 延遲目標下的容量（Sarathi-Serve, Figure 12）
#
# 論文問：兩個 token 之間隔的時間，第 99 百分位數要維持在目標以下，一個副本（replica）每秒最多能接多少個請求？它對三種批次上限的 vLLM、兩種 token 預算的 Sarathi-Serve，在一整排目標值下回答這個問題。我們在 `chapter-7.2-longtail`（短的聊天輪與長的檢索提示詞混在一起）上做同樣的事：一個到達率只有在它自己和所有試過的更低到達率都達標時才算數，而且等位子的時間中位數要維持在 2 s 以內（論文判斷負載撐不撐得住的規則）。

# %% [markdown]
# 和論文一樣，在嚴格的目標下，批次上限對連續批次幾乎沒有影響：它的 P99 間隔由長提示詞的 prefill 步驟決定，而不是由有多少 decode 跟著跑決定。（這裡三種上限給出完全相同的列，還有第二個原因：每個位子一段 4,096 個位置的 slab，H200 的 KV 記憶體只放得下 38 個位子，所以 64 和 128 都被壓到 38。卡住的是記憶體，不是批次上限：這就是第 8 章的 PagedAttention 要清償的債。）小的 token 預算換得到嚴格的目標；大的預算一旦比提示詞還長，就和沒有預算一樣。我們代替 vLLM 的策略會把 prefill 和 decode 混在一起（Orca 的規則）；它的停頓和 vLLM 一樣長，只是 vLLM 改成在 prefill 那一步暫停 decode。
#
# ### 混合、切 chunk，或兩者都做（Sarathi-Serve, Table 4）
#
# 論文的消融實驗一次只留一種要素。換成我們的策略：
#
# * **只混合**：`continuous`，prefill 優先：新到者的整段提示詞在下一步和 decode 一起跑；
# * **只切 chunk**：`ChunkOnly`：提示詞切成不超過預算的 chunk，但一步只帶 chunk 或只帶 decode，從不兩者都有；兩種工作都在等時，兩種步驟輪流上場；
# * **兩者都做**：`chunked`：先排每個 decode，再用 chunk 填滿同一步剩下的預算。
#
# 全部使用 1,024 個 token 的預算和 128 個位子，`chapter-7.2-longtail`，每秒 8 個請求。
#
# **預測。** 三者中哪一個的 P99 間隔最低：1（只混合）、2（只切 chunk）還是 3（兩者都做）？

# %% [markdown]
# 每種要素單獨使用，都只修好一個數字：只混合讓第一個 token 來得快，但長提示詞會讓所有人停頓；只切 chunk 限住了停頓，卻讓新到者和 decode 輪流排隊。兩者合起來才能兩個都壓低，這正是論文的發現。
#
# ### 兩種負載下的延遲分布（Anyscale 的 CDF）
#
# Anyscale 那篇文章用輕負載和重負載下的延遲分布來比較各家框架。這裡比較的是：請求級批次（`dynamic`：湊滿 32 個，或 100 ms 內來多少算多少）、連續批次和 chunked，工作負載的輸出長度以 100 個 token 為中位數向兩邊散開。`spread` 就是那顆旋鈕：0 讓每個請求一樣長；數值越大，尾巴拖得越長，最快完成者問題也跟著變嚴重。

# %% [markdown]
# 同樣的執行放進 widget 的延遲視圖（每個策略一條線，標出 p50 和 p99），分散程度和負載都是旋鈕：每動一次，就重跑三次 dry run 並重畫。

# %% [markdown]
# ## 問題
#
# 1. 在 Anyscale 的格子圖裡，S3 完成之後，還有哪幾次迭代在替它算 token？為什麼連續批次一個都不算？
# 2. 在 TensorRT-LLM 的那幾張圖裡，哪個限制讓 R3 進不了迭代 1？哪個讓 R5 進不了迭代 2？context chunking 放寬的是哪一個？
# 3. vLLM 的規則和 Orca 的規則只有一個讓 A 在 prefill 那一步也能計算，為什麼 A 最長的間隔在兩者下卻差不多？
# 4. FasterTransformer 的規則為了讓 A 的間隔保持很短，放棄了什麼？
# 5. 我們的 slab 全都一樣大。vLLM 論文 Figure 3 裡的哪一種記憶體浪費，在這種佈局下不會出現？哪一種反而變得更嚴重？
# 6. 為什麼在嚴格的 P99 目標下，調高批次上限幾乎不會改變連續批次的容量？
# 7. 在消融實驗裡，哪一種要素壓低了 P99 間隔？哪一種讓 TTFT 保持在低點？
