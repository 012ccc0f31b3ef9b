"""No learner-facing sentence is built outside the language table (tinyserve.lang).

Scans what a learner's screen is made of: the notebooks' code cells (chapters/src, the solutions), the widgets,
the static figures and the exercises' checkers. A string literal with two words of letters in a row is prose;
prose belongs in lib/tinyserve/lang/ with both languages; so does any word given to a call that draws or
prints text (a title, an axis label, a legend entry, a print). Docstrings are not shown to learners. A literal that
is really not prose (a regular expression, a file name, a plotly template) ends its line with `# words: ok`.
"""
from __future__ import annotations

import ast
import io
import json
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROSE = re.compile(r"[A-Za-z]{2,}[ ,;:]+[A-Za-z]{2,}")
WORD = re.compile(r"[A-Za-z]{3,}")
SHOWN_BY = {"print", "set_title", "set_xlabel", "set_ylabel", "suptitle", "xlabel", "ylabel", "title", "text",
            "annotate", "legend", "Label", "HTML", "Button", "Dropdown", "ToggleButtons"}
SHOWN_AS = {"label", "title", "name", "text", "xlabel", "ylabel", "description", "hovertemplate", "legend_title",
            "title_text", "tooltip", "placeholder", "question", "caption", "message", "hint"}
TAGS = re.compile(r"<[^>]*>|%\{[^}]*\}|\{[^}]*\}")  # HTML markup and template fields are not words
SOURCES = [*sorted((ROOT / "widgets" / "tinyserve_widgets").glob("*.py")),
           ROOT / "lib" / "tinyserve" / "analysis" / "figures.py",
           *sorted((ROOT / "lib" / "tinyserve" / "classroom").glob("checks*.py")),
           *(ROOT / "lib" / "tinyserve" / "classroom" / f"{m}.py" for m in ("harness", "integrity", "plans"))]


def code_cells() -> dict[str, str]:
    """name -> Python text of every place above (a notebook's code cells joined, magics dropped)."""
    sys.path.insert(0, str(ROOT / "chapters"))
    try:
        from build import parse
    finally:
        sys.path.pop(0)
    out = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in SOURCES if p.exists()}
    for src in sorted((ROOT / "chapters" / "src").glob("7.*.py")):
        cells = [c.source for c in parse(src.read_text(encoding="utf-8")) if c.cell_type == "code"]
        out[str(src.relative_to(ROOT))] = "\n\n".join(cells)
    for nb in sorted((ROOT / "chapters" / "solutions").glob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        code = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        # an answer region is what a learner writes (the reference answer here), not text we show
        out[str(nb.relative_to(ROOT))] = re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "pass", code, flags=re.S)
    return {k: "\n".join(ln for ln in v.splitlines() if not ln.lstrip().startswith(("%", "!"))) for k, v in out.items()}


def docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def prose_outside_table(text: str) -> list[tuple[int, str]]:
    """(line, literal) of every prose literal not marked `# words: ok`."""
    tree = ast.parse(text)
    ok_lines = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT and "words: ok" in tok.string}
    skip = docstrings(tree)
    shown, config = set(), set()  # literals handed straight to the screen; literals that configure a call
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            config.update(id(k.value) for k in node.keywords if k.arg not in SHOWN_AS)
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            args = list(node.args) if fn in SHOWN_BY else []
            if fn in ("text", "annotate"):  # ax.text(x, y, s) / ax.annotate(s, xy): only s is shown
                args = node.args[2:3] if fn == "text" else node.args[:1]
            args += [k.value for k in node.keywords if k.arg in SHOWN_AS]
            for a in args:
                parts = a.values if isinstance(a, ast.JoinedStr) else [a]
                shown.update(id(p) for p in parts if isinstance(p, ast.Constant))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip | config:
            lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            words = TAGS.sub(" ", node.value)
            prose = PROSE.search(words) or (id(node) in shown and WORD.search(words))
            if prose and not ok_lines.intersection(lines):
                found.append((node.lineno, node.value[:70]))
    return sorted(found)


def test_learner_facing_sentences_come_from_the_language_table():
    bad = {name: hits for name, text in code_cells().items() if (hits := prose_outside_table(text))}
    report = "; ".join(f"{name}: " + ", ".join(f"line {ln} {s!r}" for ln, s in hits[:4]) for name, hits in bad.items())
    assert not bad, f"{sum(map(len, bad.values()))} sentences outside tinyserve.lang: {report}"


def test_the_scanner_finds_prose_and_skips_what_is_not():
    text = 'def f():\n    """A docstring is fine."""\n    print(f"{n} slots are wasted here")\n' \
           'x = "a b"\ny = "not prose at all"  # words: ok\nz = t("7.0.key", n=1)\n' \
           'ax.set_xlabel("batch")\nplt.plot(x, y, label=f"B={b}")\nplt.plot(x, y, label="decode")\n'
    assert prose_outside_table(text) == [(3, " slots are wasted here"), (7, "batch"), (9, "decode")]
