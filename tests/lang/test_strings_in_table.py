"""No learner-facing sentence is built outside the language table (tinyserve.lang).

Scans what a learner's screen is made of: the notebooks' code cells (chapters/src, the solutions) and every
module of lib/tinyserve and widgets/tinyserve_widgets (the engine's errors, the CLI's output and --help, the
widgets, the figures, the classroom), but for lang/ itself (the table) and three maintainers' tools, NOT_SHOWN:
tools/train.py (the log of retraining the shipped checkpoint), tools/bench.py (the benchmark against transformers:
a measurement record kept beside benchmarks/, compared across versions) and tools/calibrate.py (it writes a
preset's JSON: data, shown through the table's engine.preset.* keys once a preset ships; the CLI's own line about
it is in tools/cli.py, scanned).
A string literal with two words of letters in a row is prose; prose belongs in lib/tinyserve/lang/ with both
languages; so does any word given to a call that draws or prints text (a title, an axis label, a legend entry, a
print, an option's help). Docstrings are not shown to learners. A literal that is really not prose (a regular
expression, a file name, a plotly template, data such as a trace's finish_reason, a bug's message) ends its line
with `# words: ok` and why. And every error a user can meet is said through t(): the message given to
TinyserveError, argparse.ArgumentTypeError or a parser's .error() is a t(...) call (or a name bound to one), unless
its line says `# words: ok (why)`.
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
            "title_text", "tooltip", "placeholder", "question", "caption", "message", "hint", "help"}
TAGS = re.compile(r"<[^>]*>|%\{[^}]*\}|\{[^}]*\}")  # HTML markup and template fields are not words
PACKAGE = ROOT / "lib" / "tinyserve"
NOT_SHOWN = {PACKAGE / "tools" / f"{m}.py" for m in ("train", "bench", "calibrate")}  # why: the docstring
SOURCES = [p for p in (*sorted(PACKAGE.rglob("*.py")), *sorted((ROOT / "widgets" / "tinyserve_widgets").rglob("*.py")))
           if (PACKAGE / "lang") not in p.parents and p not in NOT_SHOWN]
RAISES = {"TinyserveError", "ArgumentTypeError"}  # and any `...parser.error(...)`
REASON = re.compile(r"words: ok \(.+\)")


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


def _is_said(node: ast.AST, said: set[str]) -> bool:
    """A t(...) call (or lang.t), a name bound to one, or a choice between two such."""
    if isinstance(node, ast.Call):
        fn = node.func
        return (fn.id if isinstance(fn, ast.Name) else getattr(fn, "attr", "")) == "t"
    if isinstance(node, ast.IfExp):
        return _is_said(node.body, said) and _is_said(node.orelse, said)
    return isinstance(node, ast.Name) and node.id in said


def errors_outside_table(text: str) -> list[tuple[int, str]]:
    """(line, message source) of every TinyserveError / ArgumentTypeError / parser.error message not given by t()."""
    tree = ast.parse(text)
    reasons = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(text).readline)
               if tok.type == tokenize.COMMENT and REASON.search(tok.string)}
    said: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_said(node.value, set()):
            said.update(tg.id for tg in node.targets if isinstance(tg, ast.Name))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        fn = node.func
        name = fn.id if isinstance(fn, ast.Name) else getattr(fn, "attr", "")
        parser_error = name == "error" and isinstance(fn, ast.Attribute) and ast.unparse(fn.value).endswith("parser")
        if (name in RAISES or parser_error) and not _is_said(node.args[0], said) and not reasons.intersection(
                range(node.lineno, (node.end_lineno or node.lineno) + 1)):
            found.append((node.lineno, ast.unparse(node.args[0])[:70]))
    return sorted(found)


def test_learner_facing_sentences_come_from_the_language_table():
    bad = {name: hits for name, text in code_cells().items() if (hits := prose_outside_table(text))}
    report = "; ".join(f"{name}: " + ", ".join(f"line {ln} {s!r}" for ln, s in hits[:4]) for name, hits in bad.items())
    assert not bad, f"{sum(map(len, bad.values()))} sentences outside tinyserve.lang: {report}"


def test_every_error_message_is_said_through_the_table():
    bad = {str(p.relative_to(ROOT)): hits for p in SOURCES if (hits := errors_outside_table(p.read_text("utf-8")))}
    report = "; ".join(f"{name}: " + ", ".join(f"line {ln} {s}" for ln, s in hits[:4]) for name, hits in bad.items())
    assert not bad, f"{sum(map(len, bad.values()))} error messages not given by t(): {report}"


def test_the_scan_reads_every_folder_of_the_package():
    folders = {p.parent.relative_to(PACKAGE).parts[:1] for p in SOURCES if PACKAGE in p.parents}
    assert {("core",), ("cost",), ("trace",), ("model",), ("tools",), ("analysis",), ("classroom",), ()} <= folders
    assert not any((PACKAGE / "lang") in p.parents for p in SOURCES)


def test_the_scanner_finds_prose_and_skips_what_is_not():
    text = 'def f():\n    """A docstring is fine."""\n    print(f"{n} slots are wasted here")\n' \
           'x = "a b"\ny = "not prose at all"  # words: ok\nz = t("7.0.key", n=1)\n' \
           'ax.set_xlabel("batch")\nplt.plot(x, y, label=f"B={b}")\nplt.plot(x, y, label="decode")\n' \
           'p.add_argument("--x", help="seconds")\n'
    assert prose_outside_table(text) == [(3, " slots are wasted here"), (7, "batch"), (9, "decode"), (10, "seconds")]


def test_the_error_scan_finds_messages_not_given_by_t():
    text = ('msg = t("engine.a", n=1)\n'
            'raise TinyserveError(t("engine.b"))\n'
            'raise TinyserveError(msg)\n'
            'raise TinyserveError(t("engine.c") if x else t("engine.d"))\n'
            'raise TinyserveError(f"policy: unknown {p!r}")\n'
            'raise argparse.ArgumentTypeError("must be an integer")\n'
            'self.parser.error(f"{x} is bad")\n'
            'raise TinyserveError(f"{name}: not a knob")  # words: ok (a bug, not user input)\n'
            'raise TinyserveError("no reason given")  # words: ok\n'
            'raise TinyserveError(\n    other)\n')
    assert [ln for ln, _ in errors_outside_table(text)] == [5, 6, 7, 9, 10]
