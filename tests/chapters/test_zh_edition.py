"""The 繁體中文 edition reads as Chinese: what its stored notebooks show holds no Latin word but the allowed ones,
uses one term for each thing, and has no line break inside a Chinese paragraph.

What a reader meets is walked in every stored zh-TW notebook (chapters/zh-TW/*.ipynb, exercises/, solutions/):
markdown prose (code spans, fences and link targets are code), the comments of code cells (the code itself is one
source for both editions and is not prose), stream output, text/plain, HTML and markdown outputs, plotly figures'
words, the words a matplotlib figure actually drew and the words a widget showed (both recorded into the output's
metadata by the build: tinyserve.lang.drawn, $TINYSERVE_RECORD_TEXT set by chapters/build.py). The package's
translations that reach the notebooks (lib/tinyserve/locale/zh_TW/LC_MESSAGES/*.po) are read too, and an explorer
with every control and view is built under set_language("zh-TW") (the stored notebooks show only some settings).

The allowed Latin words, and the rules that recognise code, names a learner types and citations, are in
chapters/locale/zh_TW/allowed-latin.txt. A failure lists every offender, grouped per notebook and cell: a to-do list.

    python -m pytest -q -p no:xdist tests/chapters/test_zh_edition.py
"""
from __future__ import annotations

import io
import json
import re
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ROOT / "chapters"
ZH = CHAPTERS / "zh-TW"
ALLOWED_FILE = CHAPTERS / "locale" / "zh_TW" / "allowed-latin.txt"
PACKAGE_PO = ROOT / "lib" / "tinyserve" / "locale" / "zh_TW" / "LC_MESSAGES"
KEY = "tinyserve/text"  # tinyserve.lang.drawn.KEY (not imported: the test reads files only)
PNG, WIDGET, PLOTLY = "image/png", "application/vnd.jupyter.widget-view+json", "application/vnd.plotly.v1+json"
NOTEBOOKS = sorted([*ZH.glob("*.ipynb"), *(ZH / "exercises").glob("*.ipynb"), *(ZH / "solutions").glob("*.ipynb")])
# the package's areas whose words a zh-TW notebook prints, draws or shows (cli and classroom reach a terminal)
AREAS = ("engine", "figures", "widgets", "exercises", "ch7_0", "ch7_1", "ch7_2", "ch7_3", "ch7_4", "ch7_5", "ch7_6", "ch7_7")

CJK = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
WORD = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z][A-Za-z0-9]*")
LABEL = re.compile(r"[A-Za-z]{1,2}\d+")  # S5, R3, r0, p50, p1024, H100
URL = re.compile(r"https?://\S+|www\.\S+|\]\([^)]*\)")
CITATION = re.compile(r"https?://|www\.|\bdoi\b|arXiv|\bet al\.", re.I)
# the citation itself, inside a Chinese sentence: an address, an arXiv or doi number, "Kwon et al., Title, Venue"
CITATION_SPAN = re.compile(r"https?://\S+|www\.\S+|\]\([^)]*\)|\barXiv:\s*[\w./]+|\bdoi:\s*\S+"
                           r"|[A-Z][\w-]*(?:\s+and\s+[A-Z][\w-]*)?\s+et al\.[^。；）)\n]*"
                           r"|\*[^*\n]*(?:https?://|\]\()[^*\n]*\*"  # an italic source line with its link,
                           r"|\*[^*\n]*\*(?=\s*<?https?://)")  # or followed by it
TITLE = re.compile(r"「[^」\u3400-\u9fff]*」")  # beside a citation: the source's own English title, quoted
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# names a learner types: a knob set to a number (rate=0.5), a path with a file name, a version (2.13.0+cpu), a
# name with an underscore or a dot inside, an id of letters, digits and hyphens with a digit in it (h200-70b-fp8)
CODE_NAME = re.compile(r"(?<![\w/-])[A-Za-z_]\w*=(?=[\d.])"
                       r"|(?<![\w/-])(?:(?:[\w.-]+/)+[\w.-]*\.\w+|\d[\w.]*\+\w+|\w*_\w*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"
                       r"|(?=[\w.-]*\d)[A-Za-z0-9][A-Za-z0-9.]*(?:-[A-Za-z0-9.]+)+)(?![\w-])")
MARKUP = re.compile(r"<[^>]*>|&#?\w+;|%\{[^}]*\}|\{[^{}]*\}|'[\w./-]+'")  # and a 'quoted' name
TEX = re.compile(r"\$[^$]*\$")
ITEM_LABEL = re.compile(r"\([a-z]\)"  # the exercises' items: (a), (b), ...
                        r"|(?<![\w])[A-Za-z]+\d*:(?:d|w|p\d+(?:\+pad\d+)?)(?![\w+])")  # 7.5's marks: S3:w, S1:p3+pad1
REPR = re.compile(r"[A-Z]\w*\(")  # an object's repr, as a widget's text/plain is: VBox(children=...
LIST_ITEM = re.compile(r"\s*([-*+•]|\d+[.)])\s")
# an error message that names what the learner typed: "timeout: must be ...", "{where}: ...", "workload {name}: ..."
ERROR = re.compile(r"\s*(\{\w+\}|[\w.-]+)( \{?\w+\}?)?: ")
# comments that are read by machines, not people: never translated (chapters/editions.py MARKERS)
MARKER = re.compile(r"^(NBVAL_[A-Z_]+|(BEGIN|END) (SOLUTION|HIDDEN TESTS)|noqa\b.*|type: ignore.*|pragma\b.*)$")


# ------------------------------------------------------------------------------------------- the list
def allowed() -> tuple[re.Pattern, dict[str, set[str]]]:
    """(a pattern of every allowed word and phrase, {notebook stem: first lines of its exempt outputs})."""
    words, exempt = [], defaultdict(set)
    for line in ALLOWED_FILE.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("output:"):
            stem, _, first = line[len("output:"):].partition("|")
            exempt[stem.strip()].add(first.strip())
            continue
        words.append(line)
    alts = set()
    for w in words:
        alts.update({w, w[:1].upper() + w[1:]})
    pattern = "|".join(re.escape(w) for w in sorted(alts, key=len, reverse=True))
    pattern = pattern.replace("\\ ", r"\s+")  # a phrase may be wrapped across lines
    return re.compile(rf"(?<![A-Za-z0-9_])(?:{pattern})(?![A-Za-z0-9_])"), exempt


ALLOWED, EXEMPT = allowed()


def items(text: str) -> list[str]:
    """A text's lines, a list item's continuation lines (indented deeper) joined to it."""
    out: list[list[str]] = []
    indent = 0
    for line in text.split("\n"):
        ind = len(line) - len(line.lstrip())
        if out and line.strip() and LIST_ITEM.match(out[-1][0]) and ind > indent:
            out[-1].append(line)
        else:
            out.append([line])
            indent = ind
    return ["\n".join(i) for i in out]


def cited(item: str) -> str:
    """A line or list item with its citations left out: a reference in English (a citation and no Chinese) is all
    citation; in a Chinese sentence only the citation is, not the words around it ("January 2024")."""
    if not CITATION.search(item):
        return item
    rest = TITLE.sub(" ", CITATION_SPAN.sub(" ", item))
    return rest if HAN.search(rest) else ""


def latin(text: str, also: set[str] = frozenset()) -> list[tuple[str, str]]:
    """(word, its context) of every Latin word of text that is not allowed (also: names allowed here)."""
    found = []
    for item in map(cited, items(text)):
        s = TEX.sub(lambda m: re.sub(r"\\[A-Za-z]+", " ", m.group(0)), item)
        s = MARKUP.sub(" ", URL.sub(" ", re.sub(r"`[^`\n]*`", " ", s)))
        s = ITEM_LABEL.sub(" ", CODE_NAME.sub(" ", s))
        s = ALLOWED.sub(" ", s)
        for m in WORD.finditer(s):
            w = m.group(0)
            if LABEL.fullmatch(w) or w in also:
                continue
            at = item.find(w)
            found.append((w, " ".join(item[max(0, at - 16):at + len(w) + 16].split())))
    return found


# ----------------------------------------------------------------------------------- what a reader meets
def markdown_prose(md: str) -> str:
    """A markdown cell without its code: fences, `code spans`, images' and links' targets."""
    md = re.sub(r"(?ms)^\s*(```|~~~).*?^\s*\1[^\n]*$", " ", md)
    return re.sub(r"`[^`\n]*`", " ", md)


def docstrings(text: str) -> list[str]:
    """The docstrings of a code cell (its magics blanked): the first statement of a module, class or function when
    it is a string; none in a cell that does not parse."""
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    return [d for node in ast.walk(tree) if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                                ast.AsyncFunctionDef))
            and (d := ast.get_docstring(node, clean=True))]


def comments(source: str) -> tuple[list[str], set[str]]:
    """(the comments and docstrings of a code cell as a reader reads them, the names its code uses)."""
    text = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.split("\n"))
    out, names = docstrings(text), set()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        tokens = []
        out = [ln.split("#", 1)[1] for ln in text.split("\n") if ln.lstrip().startswith("#")]
    for tok in tokens:
        if tok.type == tokenize.NAME:
            names.add(tok.string)
        elif tok.type == tokenize.COMMENT:
            c = tok.string.lstrip("#").strip()
            if MARKER.match(c):
                continue
            out.append(re.sub(r"^words: ok\b", "", c))
    return out, names


def shown(nb_path: Path) -> list[tuple[int, str, str, set[str]]]:
    """(cell index, what kind, text, names allowed there) of everything a reader of the notebook meets; a figure or
    widget whose words were not recorded comes as kind "unrecorded"."""
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    stem = nb_path.stem
    out = []
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            out.append((i, "prose", markdown_prose(src), set()))
            continue
        if cell["cell_type"] != "code":
            continue
        texts, names = comments(src)
        out.extend((i, "comment", c, names) for c in texts)
        for o in cell.get("outputs", []):
            if o["output_type"] == "stream":
                text = "".join(o["text"])
                if text.strip().split("\n")[0].strip() not in EXEMPT.get(stem, ()):
                    out.append((i, "output" if o.get("name") == "stdout" else "stderr", text, set()))
                continue
            data, md = o.get("data", {}), o.get("metadata", {})
            for mime, kind in ((PNG, "figure"), (WIDGET, "widget")):
                if mime in data or KEY in md.get(mime, {}):  # a figure kept closed under a hint: in its HTML
                    words = md.get(mime, {}).get(KEY)
                    if words is None:
                        out.append((i, "unrecorded", kind, set()))
                    else:
                        out.extend((i, kind, w, set()) for w in words)
            if PLOTLY in data:
                from tinyserve.lang.drawn import figure_words
                out.extend((i, "figure", w, set()) for w in figure_words(data[PLOTLY]))
            if "text/html" in data:
                out.append((i, "html", "".join(data["text/html"]), set()))
            if "text/markdown" in data:
                out.append((i, "output", markdown_prose("".join(data["text/markdown"])), set()))
            plain = "".join(data.get("text/plain", ""))
            if plain and not {PNG, PLOTLY, "text/html", "text/markdown", "image/svg+xml"} & set(data) \
                    and not (WIDGET in data and REPR.match(plain)):  # a widget's repr: its words are recorded
                out.append((i, "output", plain, set()))
    return out


def where(nb_path: Path) -> str:
    return str(nb_path.relative_to(ROOT))


def report(title: str, groups: dict[str, list[str]]) -> str:
    n = sum(len(v) for v in groups.values())
    lines = [f"{title}: {n} in {len(groups)} files"]
    for name, rows in groups.items():
        lines.append(f"{name} ({len(rows)}):")
        lines.extend(f"  {r}" for r in rows)
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ the Latin words
def latin_offenders(nb_path: Path) -> list[str]:
    """One line per cell and kind: the words not allowed, each with a little context."""
    per: dict[tuple[int, str], dict[str, None]] = defaultdict(dict)
    unrecorded = []
    for i, kind, text, names in shown(nb_path):
        if kind == "unrecorded":
            unrecorded.append(f"cell {i}: the {text}'s words were not recorded (rebuild it: python chapters/build.py "
                              f"--lang zh-TW {nb_path.stem})")
            continue
        bad = dict(latin(text, names))
        if len(bad) > 3:  # an English sentence: show it once
            flat = " ".join(text.split())
            per[(i, kind)][f"«{flat[:90]}{'…' if len(flat) > 90 else ''}» ({len(bad)} words)"] = None
        else:
            per[(i, kind)].update({f"{w} «{ctx}»": None for w, ctx in bad.items()})
    rows = [f"cell {i} {kind}: " + "; ".join(words) for (i, kind), words in sorted(per.items()) if words]
    return rows + unrecorded


def test_the_zh_TW_notebooks_show_no_latin_word_but_the_allowed_ones():
    assert len(NOTEBOOKS) >= 15, NOTEBOOKS  # 7 lessons, 4 exercises, 4 solutions
    groups = {where(p): rows for p in NOTEBOOKS if (rows := latin_offenders(p))}
    assert not groups, report("Latin words not in chapters/locale/zh_TW/allowed-latin.txt (say them in Chinese; "
                              "a word the book itself uses goes in the list with its reason)", groups)


def po_entries(path: Path) -> list[tuple[int, str, str]]:
    """(line, key, translation) of a package catalog's entries."""
    from tinyserve.lang import catalogs

    return [(m.lineno, m.context or m.id, m.id, m.string) for m in catalogs.read(path) if m.id and m.string]


def test_the_package_words_that_reach_the_zh_TW_notebooks_use_only_allowed_latin():
    """engine.po, widgets.po, figures.po, ch7_*.po, exercises.po: every translation, even one no stored output
    shows now (a knob's other setting, a widget's other state)."""
    groups = {}
    for area in AREAS:
        path = PACKAGE_PO / f"{area}.po"
        rows = []
        for line, key, english, text in po_entries(path):
            # an error names what the learner typed (English "name: ..."): those words are code
            named = set(WORD.findall(english)) if ERROR.match(english) else set()
            bad = latin(text.replace("\\n", "\n"), named)
            if bad:
                rows.append(f"{line} {key}: " + "; ".join(dict.fromkeys(f"{w} «{ctx}»" for w, ctx in bad)))
        if rows:
            groups[str(path.relative_to(ROOT))] = rows
    assert not groups, report("Latin words in the package's 繁體中文 (not in allowed-latin.txt)", groups)


def test_the_widgets_speak_chinese_in_every_control_and_view():
    """An explorer with every view and control, as tinyserve_widgets builds it under set_language("zh-TW"): its
    labels, options, tooltips, sentences and plotly figures (the stored notebooks show only the settings they
    open with)."""
    tw = pytest.importorskip("tinyserve_widgets")
    import tinyserve
    from tinyserve.lang import drawn
    from tinyserve_widgets.predict import Predict

    tinyserve.set_language("zh-TW")
    try:
        shown_words = [*drawn.widget_words(tw.Explorer("chapter-7.2-longtail", workload_knobs={"n": 20})),
                       *drawn.widget_words(Predict("幾步？", unit="步", lo=0, hi=100))]
    finally:
        tinyserve.set_language("en")
    bad = {w: ", ".join(x for x, _ in latin(w)) for w in shown_words if latin(w)}
    assert not bad, report("Latin words in the widgets (zh-TW)", {"tinyserve_widgets": [
        f"{v} «{k[:80]}»" for k, v in bad.items()]})


@pytest.mark.parametrize("text, bad", [
    ("連續批次的 decode 步驟，每步 20.4 ms，B=32、p99 與 TTFT", []),
    ("static 與 dynamic 的比較（16 req/s）", ["static", "dynamic", "req"]),
    ("「prefill-first」讓 decode 等待", ["first"]),
    ("再執行一次這個 cell", ["cell"]),
    ("工作負載 chapter-7.2-longtail、硬體 h200-70b-fp8、max_model_len", []),
    (" - NVIDIA H200 datasheet, https://www.nvidia.com/ :\n   H200 SXM 141 GB, both with sparsity\n下一段 policy",
     ["policy"]),
    ("Kwon et al., Efficient Memory Management, SOSP 2023", []),
    ("位子 %{y}<br>第 %{customdata[0]} 步 <b>slab</b> {name}", []),
    ("$\\mathdefault{10^{2}}$ 與 S5、r0、p1024", []),
    ("## (a) Padding：chapter-7.2-longtail (rate=0.5, n=100)，PyTorch 2.13.0+cpu", []),
    (" - 激勵值、CUDA\n   Graphs 與工作區；torch 2.13", ["torch"]),
    ("迭代 1：S1:p3+pad1 S2:d S3:w x1:d A:p1024 | 等待：S5", []),
    ("執行 `python benchmarks/costmodel.py`，目標見 tools/validate.py；16 req/s", ["req"]),
    ("Prefill 先做；Chunked prefill 再做", []),
])
def test_the_rules_recognise_latin_words(text, bad):
    assert [w for w, _ in latin(text)] == bad


def test_a_comment_counts_but_the_code_around_it_does_not():
    src = ('# NBVAL_CHECK_OUTPUT\nx = run("static")  # the policy\nplt.legend(loc="upper left")  # words: ok\n'
           "# 用 CHAPTER_SCALE 切換\nCHAPTER_SCALE = False")
    texts, names = comments(src)
    assert [w for c in texts for w, _ in latin(c, names)] == ["the", "policy"]
    texts, names = comments('def run(x):\n    """Returns the same value."""\n    return x  # 傳回')
    assert [w for c in texts for w, _ in latin(c, names)] == ["Returns", "the", "same", "value"]  # a docstring too


# ----------------------------------------------------------------------------------------- the terms
# (a forbidden variant, the term the edition uses[, a pattern that, found in the same line or list item, makes the
# variant right there]): chapters/README.md's glossary, the issues' decisions (issue 42: one word each for replica,
# dry run, stall, preset and default; 佔用 as the book writes it; JupyterLab's own words)
TERMS = [
    (r"占", "佔 (the book's form: 佔用, 佔比, 搶佔)"),
    (r"程式格", "儲存格 (JupyterLab's word)"),
    (r"單純的?\s*(decode\s*)?步", "一般步 (a plain step: 一般一步, 一般的 decode 步)"),
    (r"被保留|保留(?!了形狀|不動)(?=\s*(的\s*KV|KV|記憶體|空間|區|量|最大值|著|\d|個|同樣))|(替|為)[^，。；]{0,24}保留",
     "預留 (reserved K/V; 保留 keeps its other senses)"),
    (r"視圖", "檢視"),
    (r"(?<![A-Za-z])[Cc]ells?(?![A-Za-z])", "儲存格"),
    (r"(?<![A-Za-z])[Nn]otebooks?(?![A-Za-z])", "筆記本"),
    (r"記住這些", "重點整理 (the closing heading)"),
    (r"激活函數", "激勵函數"),
    (r"(?<![A-Za-z])[Pp]olic(y|ies)(?![A-Za-z])", "策略"),
    (r"(?<![A-Za-z])[Pp]resets?(?![A-Za-z])", "預設組態 (a preset)"),
    (r"硬體預設(?!組態)", "預設組態 (a preset; 預設 alone is a default)"),
    (r"(?<![A-Za-z])[Pp]rompts?(?![A-Za-z])", "提示詞"),
    (r"(重新啟動|重啟|啟動|重新執行|中斷)\s*(Jupyter\s*的\s*)?[Kk]ernel|[Kk]ernel\s*(重新啟動|重啟|選單)|"
     r"[Kk]ernel\s*[→>]|Restart Kernel", "核心 (Jupyter's kernel; a GPU kernel stays kernel)"),
    (r"副本", "複本 (a replica)"),
    (r"重播", "模擬執行 (a dry run; 重播 is a replay against a real server)", r"伺服器"),
    (r"停頓", "卡頓 (a stall; the verb: 卡住)"),
    (r"收合|折疊", "摺疊 (JupyterLab's word: 全部摺疊, 摺疊所有輸出)"),
]
CHAPTER_PO = CHAPTERS / "locale" / "zh_TW"  # the lessons' and exercises' catalogs: their markdown and comments
INSTRUCTORS_ZH = sorted((CHAPTERS / "instructors").glob("*.zh-TW.md"))  # the teacher pack in 繁體中文


def term_offenders(text: str, also: set[str] = frozenset()) -> list[str]:
    """The forbidden variants in a text (template fields, 'quoted' names, code names and URLs are not words; also:
    names allowed here, such as the argument an error message names)."""
    text = MARKUP.sub(" ", CODE_NAME.sub(" ", URL.sub(" ", re.sub(r"`[^`\n]*`", " ", text))))
    return [f"{m.group(0)!r} → {term}" for pattern, term, *unless in TERMS for m in re.finditer(pattern, text)
            if m.group(0) not in also and not (unless and re.search(unless[0], text))]


def prose_offenders(text: str) -> list[str]:
    """term_offenders of each line or list item of a text, a citation's left out."""
    return [bad for item in items(text) for bad in term_offenders(cited(item))]


def chapter_entries(path: Path) -> list[tuple[int, str, str, str]]:
    """(line, what it is, English, translation) of a lesson's or exercise's catalog: markdown blocks and comments."""
    from tinyserve.lang import catalogs

    return [(m.lineno, m.context or "markdown", m.id, m.string)
            for m in catalogs.read(path, unique_contexts=False) if m.id and m.string]


def term_groups() -> dict[str, list[str]]:
    """Every forbidden variant: in the stored zh-TW notebooks (prose, comments, outputs, figures' and widgets'
    words), in the catalogs they are built from (a lesson's or exercise's markdown and comments, before a
    rebuild), in the package's words that reach them, and in the teacher pack's 繁體中文."""
    groups = {}
    for p in NOTEBOOKS:
        rows = {}
        for i, kind, text, names in shown(p):
            if kind == "unrecorded":
                continue
            for item in map(cited, items(text)):
                for bad in term_offenders(item, names):
                    rows.setdefault(f"cell {i} {kind}: {bad}", None)
        if rows:
            groups[where(p)] = list(rows)
    for path in sorted(CHAPTER_PO.glob("*.po")):
        rows = [f"{line} {what}: {bad}" for line, what, english, text in chapter_entries(path)
                for bad in dict.fromkeys(prose_offenders(markdown_prose(text)))]
        if rows:
            groups[str(path.relative_to(ROOT))] = rows
    for area in AREAS:
        path = PACKAGE_PO / f"{area}.po"
        rows = [f"{line} {key}: {bad}" for line, key, english, text in po_entries(path)
                for bad in dict.fromkeys(term_offenders(text, set(WORD.findall(english)) if ERROR.match(english)
                                                        else set()))]
        if rows:
            groups[str(path.relative_to(ROOT))] = rows
    for path in INSTRUCTORS_ZH:
        md = markdown_prose(path.read_text(encoding="utf-8"))
        rows = [f"line {n}: {bad}" for n, line in enumerate(md.split("\n"), 1)
                for bad in dict.fromkeys(prose_offenders(line))]
        if rows:
            groups[str(path.relative_to(ROOT))] = rows
    return groups


def test_the_zh_TW_notebooks_use_one_term_for_each_thing():
    groups = term_groups()
    assert not groups, report("terms the 繁體中文 edition does not use (forbidden → chosen)", groups)


@pytest.mark.parametrize("text, bad", [
    ("每個位子佔用一段 KV", []),
    ("每個位子占用一段 KV", ["占"]),
    ("搶占了一個序列；decode 產能占比", ["占", "占"]),
    ("下面程式格讀取的掃描規模；這個儲存格", ["程式格"]),
    ("一般一步的 3 倍；單純的 decode 步；單純步", ["單純的 decode 步", "單純步"]),
    ("保留的 KV；每份保留空間；替永遠不會來的 token 保留記憶體；一直被保留著", ["保留", "保留", "替永遠不會來的 token 保留", "被保留"]),
    ("曲線保留了形狀；先前的圖表保留不動；預留的 KV", []),
    ("兩個複本，另一個副本", ["副本"]),
    ("模擬執行和真實模型對得上；重播也一樣", ["重播"]),
    ("這份執行紀錄沒有步驟（例如對真實伺服器重播的結果）", []),
    ("三十個序列的卡頓；生成停頓", ["停頓"]),
    ("預設為 chunk 長度 + 32；這個預設組態；硬體預設組態", []),
    ("跑在 H200 硬體預設上", ["硬體預設"]),
    ("在 h200-70b-fp8 preset 上", ["preset"]),
    ("收合的輸出、折疊的程式碼、摺疊起來的儲存格", ["收合", "折疊"]),
])
def test_the_terms_rules_catch_each_forbidden_variant(text, bad):
    assert [b.split(" → ")[0].strip("'") for b in term_offenders(text)] == bad


@pytest.mark.parametrize("where", ["notebook", "chapter catalog", "package catalog", "teacher pack"])
def test_the_terms_test_reads_every_place_the_words_live(tmp_path, monkeypatch, where):
    """A forbidden variant planted in a stored notebook's comment, a lesson's catalog, a package catalog or the
    teacher pack is found (the places a 繁體中文 word can come from)."""
    here = sys.modules[__name__]
    if where == "notebook":
        nb = {"cells": [{"cell_type": "code", "source": "x = 1  # 收合的輸出", "outputs": [
                  {"output_type": "stream", "name": "stdout", "text": "兩個副本\n"}]}]}
        path = tmp_path / "7.9-planted.ipynb"
        path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
        monkeypatch.setattr(here, "NOTEBOOKS", [path])
        monkeypatch.setattr(here, "where", lambda p: p.name)
    else:
        monkeypatch.setattr(here, "NOTEBOOKS", [])
    if where == "chapter catalog":
        (tmp_path / "7.9-planted.po").write_text(
            'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
            'msgid "The stall."\nmsgstr "生成停頓。"\n\n'
            'msgctxt "comment"\nmsgid "the default preset"\nmsgstr "硬體預設"\n', encoding="utf-8")
        monkeypatch.setattr(here, "CHAPTER_PO", tmp_path)
    else:
        monkeypatch.setattr(here, "CHAPTER_PO", tmp_path / "none")
    if where == "package catalog":
        (tmp_path / "engine.po").write_text(
            'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
            'msgctxt "k.held"\nmsgid "KV held"\nmsgstr "占用的 KV"\n', encoding="utf-8")
        monkeypatch.setattr(here, "PACKAGE_PO", tmp_path)
        monkeypatch.setattr(here, "AREAS", ("engine",))
    else:
        monkeypatch.setattr(here, "AREAS", ())
    if where == "teacher pack":
        (tmp_path / "answers-7.9.zh-TW.md").write_text("# 解答\n\n重播和真實模型一步一步都對得上。\n", encoding="utf-8")
        monkeypatch.setattr(here, "INSTRUCTORS_ZH", [tmp_path / "answers-7.9.zh-TW.md"])
    else:
        monkeypatch.setattr(here, "INSTRUCTORS_ZH", [])
    monkeypatch.setattr(here, "ROOT", tmp_path)
    found = " ".join(row for rows in term_groups().values() for row in rows)
    expected = {"notebook": ["收合", "副本"], "chapter catalog": ["停頓", "硬體預設"], "package catalog": ["占"],
                "teacher pack": ["重播"]}[where]
    assert all(f"'{w}'" in found for w in expected), found


# ------------------------------------------------------------------------------ the terms, English beside 中文
# (an English term, the one 繁體中文 word a translation of it holds): a catalog entry whose English names the thing
# translates it with the word, and 預設 is never written for anything but a default (a preset is 預設組態)
PAIRS = [
    (r"(?i)\bpresets?\b", r"預設組態", "preset → 預設組態"),
    (r"(?i)\bdry[ -]runs?\b", r"模擬執行", "dry run → 模擬執行"),
    (r"(?i)\breplicas?\b", r"複本", "replica → 複本"),
    (r"(?i)\bdefaults?\b", r"預設(?!組態)", "default → 預設"),
]
NOT_CODE = re.compile(r"`[^`\n]*`|\{[^{}]*\}|--[\w-]+|https?://\S+|\]\([^)]*\)")  # code, fields, flags, links


def pair_offenders(english: str, text: str) -> list[str]:
    """What a translation lacks (or holds) against its English, by PAIRS."""
    en, zh = NOT_CODE.sub(" ", english), NOT_CODE.sub(" ", text)
    bad = [why for en_pat, zh_pat, why in PAIRS if re.search(en_pat, en) and not re.search(zh_pat, zh)]
    if re.search(r"預設(?!組態)", zh) and not re.search(PAIRS[3][0], en):
        bad.append("預設 written for something that is not a default (a preset is 預設組態)")
    return bad


def test_each_term_is_translated_with_its_one_word():
    """Every catalog that reaches a notebook (and the CLI's, which the glossary names too), read English beside
    its translation: the lessons' and exercises' markdown and comments, the package's words."""
    groups = {}
    for path in sorted(CHAPTER_PO.glob("*.po")):
        rows = [f"{line} {what}: {bad}" for line, what, english, text in chapter_entries(path)
                for bad in pair_offenders(english, text)]
        if rows:
            groups[str(path.relative_to(ROOT))] = rows
    for area in (*AREAS, "cli"):
        path = PACKAGE_PO / f"{area}.po"
        rows = [f"{line} {key}: {bad}" for line, key, english, text in po_entries(path)
                for bad in pair_offenders(english, text)]
        if rows:
            groups[str(path.relative_to(ROOT))] = rows
    assert not groups, report("terms translated with another word (English term → its 繁體中文 word)", groups)


@pytest.mark.parametrize("english, text, bad", [
    ("the default preset", "預設用的預設組態", []),
    ("the default preset", "預設的硬體", ["preset → 預設組態"]),
    ("{name}:", "硬體預設 {name}：", ["預設 written for something that is not a default (a preset is 預設組態)"]),
    ("a dry run computes no tokens", "dry run 不會算出任何 token", ["dry run → 模擬執行"]),
    ("colocated (N replicas, --replicas)", "colocated（N 個副本）", ["replica → 複本"]),
    ("float32 (default)", "float32（預設）", []),
    ("(default {default})", "（預設組態 {default}）", ["default → 預設"]),
])
def test_the_pair_rules(english, text, bad):
    assert pair_offenders(english, text) == bad


def test_every_lesson_ends_with_the_same_summary_heading():
    """The English "What to remember" is 「重點整理」 in every zh-TW notebook that has it."""
    for p in sorted(ZH.glob("*.ipynb")):
        en = json.loads((CHAPTERS / p.name).read_text(encoding="utf-8"))
        zh = json.loads(p.read_text(encoding="utf-8"))
        heads = [(e, z) for ce, cz in zip(en["cells"], zh["cells"]) if ce["cell_type"] == "markdown"
                 for e, z in zip(re.findall(r"(?m)^#+ .*", "".join(ce["source"])),
                                 re.findall(r"(?m)^#+ .*", "".join(cz["source"])))]
        for e, z in heads:
            if "what to remember" in e.lower():
                assert "重點整理" in z, f"{where(p)}: {z!r} (the heading of {e!r} is 「重點整理」)"


# ----------------------------------------------------------------------------------------- line breaks
BREAK = re.compile(rf"[{CJK}]\n[{CJK}]")


def test_no_line_break_inside_a_chinese_paragraph():
    """A line break between two Chinese characters draws as a stray space in a browser ("以成本模型 推算")."""
    groups = {}
    for p in NOTEBOOKS:
        nb = json.loads(p.read_text(encoding="utf-8"))
        rows = []
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "markdown":
                continue
            md = re.sub(r"(?ms)^\s*(```|~~~).*?^\s*\1[^\n]*$", "", "".join(cell["source"]))
            rows += [f"cell {i}: {md[max(0, m.start() - 12):m.end() + 12]!r}" for m in BREAK.finditer(md)]
        if rows:
            groups[where(p)] = rows
    assert not groups, report("line breaks between Chinese characters inside a paragraph", groups)


# ------------------------------------------------------------------- a comment is not broken inside a word
def broken_comments(nb_path: Path) -> list[str]:
    """Two lines of one wrapped comment (whole-line comments at one indentation) where the first ends with a
    Chinese character and the next starts with one: a break that may fall inside a word (序/列, 最差/的)."""
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    rows = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        lines = "".join(cell["source"]).split("\n")
        for a, b in zip(lines, lines[1:]):
            ia, ib = len(a) - len(a.lstrip()), len(b) - len(b.lstrip())
            if ia == ib and a.lstrip().startswith("# ") and b.lstrip().startswith("# "):
                end, start = a.rstrip()[-1:], b.lstrip()[2:3]
                if HAN.match(end) and HAN.match(start):
                    rows.append(f"cell {i}: «{a.strip()[-12:]}» / «{b.strip()[2:14]}»")
    return rows


def test_no_comment_of_the_zh_TW_notebooks_is_broken_inside_a_word():
    groups = {where(p): rows for p in NOTEBOOKS if (rows := broken_comments(p))}
    assert not groups, report("comments wrapped between two Chinese characters (chapters/editions.py wraps at "
                              "punctuation or spaces; rebuild the notebook)", groups)


def test_a_comment_wraps_at_punctuation_or_spaces():
    sys.path.insert(0, str(CHAPTERS))
    try:
        import editions
    finally:
        sys.path.remove(str(CHAPTERS))
    text = "以最快完成者為例，這一段註解很長很長，要在標點之後斷行，例如序列這個詞"
    assert editions.wrap_comment(text, 40) == ["以最快完成者為例，這一段註解很長很長，", "要在標點之後斷行，例如序列這個詞"]
    assert editions.wrap_comment("位子 7 的 slab 一直被佔著 直到最後", 16) == ["位子 7 的 slab", "一直被佔著", "直到最後"]
    assert editions.wrap_comment("一二三四五六七八九十一二三", 20) == ["一二三四五六七八九十", "一二三"]  # no other place
    assert editions.wrap_comment("短", 20) == ["短"]


# ------------------------------------------------------------------- one notation for ratios in a table
RATIO_X, RATIO_BEI = re.compile(r"\d\s*×"), re.compile(r"\d\s*倍")


def mixed_ratio_tables(text: str) -> list[str]:
    """The tables of a printed output or a markdown cell (blocks of lines a blank line separates) that write a
    ratio both as "0.2×" and as "0.2 倍"."""
    return [" / ".join(block.strip().split("\n")[:2])[:90] for block in re.split(r"\n\s*\n", text)
            if block.count("\n") and RATIO_X.search(block) and RATIO_BEI.search(block)]


def test_a_table_writes_its_ratios_one_way():
    assert mixed_ratio_tables("頭\n  a  0.2×\n  b  0.2 倍到 0.25 倍") and not mixed_ratio_tables("a 0.2×\nb 0.25×")
    assert not mixed_ratio_tables("快 3 倍。\n\n表：\na 0.2×\nb 0.3×")  # prose beside a table is another block
    groups = {}
    for p in NOTEBOOKS:
        rows = [f"cell {i} {kind}: {t_}" for i, kind, text, _ in shown(p) if kind in ("output", "prose", "html")
                for t_ in mixed_ratio_tables(text)]
        if rows:
            groups[where(p)] = rows
    assert not groups, report("tables that write a ratio both as N× and as N 倍", groups)


# ------------------------------------------------------------- Chinese meets Latin across a space, rendered
def sample(spec: str, chinese: bool):
    """A value for a field of this format spec: a number where the spec formats one, else a word."""
    return 12 if re.search(r"[bcdeEfFgGnxX%,]", spec or "") else ("字詞" if chinese else "x1")


def unspaced(text: str) -> list[str]:
    """Where a Chinese character meets a Latin letter or digit with no space (code spans and addresses aside)."""
    text = URL.sub(" ", re.sub(r"`[^`\n]*`", " ", text))
    return [m.group(0) for m in re.finditer(rf"{HAN.pattern}[A-Za-z0-9]|[A-Za-z0-9]{HAN.pattern}", text)]


def test_chinese_meets_latin_letters_and_digits_across_a_space_in_every_rendered_catalog_string():
    """Every translation of the package's catalogs, rendered as t() renders it with each field filled by a Latin
    word and by a Chinese one, and every lesson's and exercise's block with its glue values filled the way
    build.py fills them, writes a space between a Chinese character and a Latin letter or digit."""
    import string

    from tinyserve.lang import fill_spaced, needs_space

    groups = {}
    for path in sorted(PACKAGE_PO.glob("*.po")):
        rows = []
        for line, key, english, text in po_entries(path):
            for chinese in (False, True):
                specs = [(name, spec) for _, name, spec, _ in string.Formatter().parse(text) if name]
                fields = {name: sample(" ".join(sp for n, sp in specs if n == name), chinese) for name, _ in specs}
                rendered = fill_spaced(text, fields) if fields else text
                rows += [f"{line} {key}: «{bad}»" for bad in unspaced(rendered)]
        if rows:
            groups[str(path.relative_to(ROOT))] = list(dict.fromkeys(rows))
    for path in sorted(CHAPTER_PO.glob("*.po")):
        rows = []
        for line, what, english, text in chapter_entries(path):
            for value in ("x1", "字詞", "12"):
                rendered = re.sub(r"\{glue\}`[^`]+`", lambda m: (" " if needs_space(m.string[:m.start()], value) else "")
                                  + value + (" " if needs_space(value, m.string[m.end():]) else ""), text)
                rows += [f"{line}: «{bad}»" for bad in unspaced(markdown_prose(rendered))]
        if rows:
            groups[str(path.relative_to(ROOT))] = list(dict.fromkeys(rows))
    assert not groups, report("a Chinese character against a Latin letter or digit with no space", groups)
