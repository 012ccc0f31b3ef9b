"""The language table: every key in every language, the same fields in each, one clear error for a bad code."""
from __future__ import annotations

import string

import pytest

import tinyserve
from tinyserve import lang


def fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}


def test_every_key_has_every_language_with_the_same_fields():
    missing, mismatched = [], []
    for key, entry in lang.table().items():
        for code in lang.LANGUAGES:
            if not (entry.get(code) or "").strip():
                missing.append(f"{key} [{code}]")
        extra = set(entry) - set(lang.LANGUAGES)
        assert not extra, f"{key}: unknown language codes {extra}"
        if entry.get("en") and entry.get("zh-TW") and fields(entry["en"]) != fields(entry["zh-TW"]):
            mismatched.append(f"{key}: en {sorted(fields(entry['en']))} zh-TW {sorted(fields(entry['zh-TW']))}")
    assert not missing, f"{len(missing)} translations missing: {missing[:20]}"
    assert not mismatched, f"placeholders differ between languages: {mismatched[:20]}"


def test_zh_tw_is_chinese_and_uses_full_width_punctuation_in_sentences():
    """A zh-TW string that is a sentence (has a CJK character) uses ，not , between CJK characters."""
    import re
    bad = [k for k, e in lang.table().items()
           if re.search(r"[\u4e00-\u9fff][,;:](?!\d)|[,;:] ?[\u4e00-\u9fff]", e.get("zh-TW", ""))]
    assert not bad, f"half-width punctuation between Chinese words: {bad[:20]}"


def test_set_language_switches_everything_and_unknown_codes_list_the_choices():
    try:
        assert tinyserve.set_language("zh_TW") == "zh-TW" and lang.language() == "zh-TW"
        with pytest.raises(ValueError) as e:
            tinyserve.set_language("fr")
        msg = str(e.value)
        assert "\n" not in msg and "'fr'" in msg and "en" in msg and "zh-TW" in msg
        assert lang.language() == "zh-TW"  # a bad code changes nothing
    finally:
        tinyserve.set_language("en")
    assert lang.language() == "en"


def test_unknown_key_is_an_error_not_a_raw_key():
    with pytest.raises(KeyError):
        lang.t("no.such.key.anywhere")


def test_wrap_counts_display_width():
    assert lang.width("abc") == 3 and lang.width("位子") == 4 and lang.width("，") == 2
    text = "連續批次每一步都重新決定批次的成員，完成的序列立刻離開位子，新到者補上空出來的位子。"
    lines = lang.wrap(text, 20)
    assert "".join(lines) == text
    assert all(lang.width(ln) <= 22 for ln in lines)  # one closing mark may hang past the edge
    assert not any(ln.startswith(("，", "。")) for ln in lines)
    assert lang.wrap("one two three four", 9) == ["one two", "three", "four"]


def test_the_zh_tw_text_uses_the_books_terms_not_invented_ones():
    """The chapter keeps padding, prefill, decode, chunked prefill, TTFT, page table in English; these six
    renderings appear nowhere in it, so they must not appear in ours (the paged layout is 區塊, its table page table)."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    invented = ["填充", "預填", "解碼", "分段預填", "首字延遲", "分頁"]
    texts = {f"lang:{k}": e.get("zh-TW", "") for k, e in lang.table().items()}
    notebooks = sorted((root / "chapters" / "locale" / "zh_TW").glob("*.po"))  # the notebooks' words
    for f in [*notebooks, root / "chapters" / "README.md", root / "README.md"]:
        texts[str(f.relative_to(root))] = f.read_text(encoding="utf-8")
    found = [(where, w) for where, text in texts.items() for w in invented if w in text]
    assert not found, found


def test_each_zh_tw_notebook_is_its_english_one_with_only_the_setup_line_changed():
    """Same code cells but for their comments and docstrings, which are translated (so nbval checks the same
    numbers), the language picked by one line, prose translated."""
    import ast
    import io
    import json
    import tokenize
    from pathlib import Path

    def _docstrings(text: str) -> set:  # where each docstring starts (line, column)
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return set()
        return {(n.body[0].lineno, n.body[0].col_offset) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
                and isinstance(n.body[0].value.value, str)}

    def _code(src: str) -> list:  # its tokens but the comments, docstrings' text and blank lines (they may wrap)
        text = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.split("\n"))
        docs = _docstrings(text)
        return [(t.type, "(a docstring)" if t.start in docs else t.string,
                 t.start[1] if t.type not in (tokenize.NEWLINE, tokenize.ENDMARKER) else None)
                for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type not in (tokenize.COMMENT, tokenize.NL)]
    root = Path(__file__).resolve().parents[2] / "chapters"
    pairs = [(root / p.name, p) for p in sorted((root / "zh-TW").glob("7.*.ipynb"))]
    assert len(pairs) == len(list(root.glob("7.*.ipynb"))) >= 7
    for en_path, zh_path in pairs:
        en, zh = (json.loads(p.read_text(encoding="utf-8"))["cells"] for p in (en_path, zh_path))
        assert [c["cell_type"] for c in en] == [c["cell_type"] for c in zh], zh_path.name
        code = [("".join(a["source"]), "".join(b["source"])) for a, b in zip(en, zh) if a["cell_type"] == "code"]
        differ = [(a, b) for a, b in code if _code(a) != _code(b)]
        assert len(differ) == 1, f"{zh_path.name}: {len(differ)} code cells differ (comments and docstrings aside)"
        a, b = differ[0]
        assert _code(b) == _code(a.replace('tinyserve.set_language("en")', 'tinyserve.set_language("zh-TW")')), \
            zh_path.name
        md = [("".join(a["source"]), "".join(b["source"])) for a, b in zip(en, zh) if a["cell_type"] == "markdown"]
        assert all(a != b for a, b in md), f"{zh_path.name}: a markdown cell is not translated"


def test_zh_tw_prose_uses_full_width_punctuation():
    """In the Chinese markdown (the notebooks' catalogs), a comma, colon or semicolon between two Chinese
    characters is full-width."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / "chapters" / "locale" / "zh_TW"
    bad = []
    for f in sorted(root.glob("*.po")):
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            prose = re.sub(r"`[^`]*`|\$[^$]*\$|\([^)]*\)\]?|https?://\S+", "", line)  # code, math, links
            if re.search(r"[\u4e00-\u9fff][,;:][\u4e00-\u9fff ]|[\u4e00-\u9fff] ?[,;][\u4e00-\u9fff]", prose):
                bad.append(f"{f.name}:{n}")
    assert not bad, bad[:20]


def test_a_field_meets_a_chinese_character_across_a_space():
    """fill_spaced: the translator's literal text as written; a space only where a field's value (whatever language
    it renders) meets a Chinese character on one side and a Latin letter or digit on the other."""
    from tinyserve.lang import fill_spaced

    text = "prefill 用{chunk}，decode 批次 {batch}"
    assert fill_spaced(text, {"chunk": "chunk 512", "batch": 8}) == "prefill 用 chunk 512，decode 批次 8"
    assert fill_spaced(text, {"chunk": "整段提示詞", "batch": 8}) == "prefill 用整段提示詞，decode 批次 8"
    assert fill_spaced("算在{conv}：{x:.1f} ms", {"conv": "prefill GPU 上", "x": 2.345}) == "算在 prefill GPU 上：2.3 ms"
    assert fill_spaced("{n:>{w}}個、{s!r}字", {"n": 3, "w": 4, "s": "ab"}) == "   3 個、'ab'字"  # quote, not a letter
    assert fill_spaced("KV佔{gb}", {"gb": "（無）"}) == "KV佔（無）"  # literal text is left as written
    import tinyserve
    from tinyserve.lang import t

    tinyserve.set_language("zh-TW")
    try:
        assert "prefill 用 chunk 512，" in t("figures.fair.split", p=1, d=1, chunk="chunk 512", batch=8)
    finally:
        tinyserve.set_language("en")
