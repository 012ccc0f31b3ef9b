"""The real `tinyserve` command in the user's locale (subprocesses, run side by side: each costs ~1 s): errors and
--help in 繁體中文 under LANG=zh_TW.UTF-8, English under LANG=C or TINYSERVE_LANG=en, and --json the same bytes in
every language (tools/speak.py; tests/tools/test_speak.py covers the lookup itself)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

LOCALE_VARS = ("TINYSERVE_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")
BAD = ["run", "--workload", "chapter-7.1-padding", "--policy", "nope", "--dry-run"]
ZH_BAD = "tinyserve：錯誤：policy：沒有 'nope' 這個選項（可選 static, dynamic, continuous, chunked）\n"
EN_BAD = "tinyserve: error: policy: unknown 'nope' (choose static, dynamic, continuous, chunked)\n"


def cli(args: list[str], cwd, **locale) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in LOCALE_VARS}
    env.update(OMP_NUM_THREADS="1", PYTHONIOENCODING="utf-8", **locale)
    return subprocess.run([sys.executable, "-m", "tinyserve", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=180, stdin=subprocess.DEVNULL)


def test_the_cli_speaks_the_users_locale(tmp_path):
    (tmp_path / "w.jsonl").write_text(  # one request too long for --max-model-len: a finish_reason and a slab rule
        '{"id": "big", "prompt_len": 400, "max_new_tokens": 20, "ignore_eos": true}\n'
        '{"id": "a", "prompt_len": 5, "max_new_tokens": 3, "ignore_eos": true}\n')
    run_json = ["run", "--workload", "w.jsonl", "--policy", "continuous", "--dry-run", "--max-model-len", "100", "--json"]
    cases = {"zh": (BAD, {"LANG": "zh_TW.UTF-8"}), "ours": (BAD, {"LANG": "zh_TW.UTF-8", "TINYSERVE_LANG": "en"}),
             "c": (BAD, {"LANG": "C"}), "help": (["run", "--help"], {"LANGUAGE": "zh_TW", "LANG": "C.UTF-8"}),
             "json_zh": (run_json, {"LANG": "zh_TW.UTF-8"}), "json_c": (run_json, {"LANG": "C"})}
    with ThreadPoolExecutor(3) as pool:
        out = dict(zip(cases, pool.map(lambda c: cli(c[0], tmp_path, **c[1]), cases.values())))

    for name, expected in (("zh", ZH_BAD), ("ours", EN_BAD), ("c", EN_BAD)):  # one line, exit 2, nothing on stdout
        assert (out[name].returncode, out[name].stdout, out[name].stderr) == (2, "", expected), name
    assert out["help"].returncode == 0 and out["help"].stdout.startswith("用法：tinyserve run")
    assert "在 --json 中附上生成的 token" in out["help"].stdout and "顯示這段說明後結束" in out["help"].stdout

    zh, c = out["json_zh"], out["json_c"]
    assert zh.returncode == c.returncode == 0
    assert zh.stdout == c.stdout  # the contract: data, the same bytes in every language
    doc = json.loads(zh.stdout)
    assert doc["kv"]["slab_rule"] == "max_model_len: given to the run"
    assert doc["requests"][0]["finish_reason"] == "prompt 400 tokens + max_new_tokens 20 exceeds max_model_len of 100"
    assert zh.stderr.startswith("tinyserve：請求 big 被拒絕：") and c.stderr.startswith("tinyserve: rejected request big:")
