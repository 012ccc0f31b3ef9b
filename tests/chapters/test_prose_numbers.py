"""A number in a learner notebook's prose comes from the code that computed it (issue 32, item 2).

The English markdown of the twelve learner notebooks (the lessons chapters/src/7.*.py, the exercises'
chapters/solutions/7.*-exercises.ipynb, widgets/demo.ipynb) is scanned block by block (the blocks the
translation catalogs hold) for numbers: digits ("7", "0.5", "4,000", "99%", "80×", "4x") and counts or
fractions written as words ("sixteen", "thirty", "hundredfold", "three quarters"). Each must be

* a {glue}`name` role, filled by chapters/build.py from what the notebook's own code recorded
  (tinyserve.lang.glue); or
* of a kind a reader expects typed: each kind one named rule below (SPANS; the values checked against the
  code, "parameter" and "workload"; ATTRIBUTED); or
* in the short allowlist of its notebook (ALLOWLIST), with the reason it is typed.

A failure prints each number with its notebook, block and sentence: glue it from the cell that computes it (a
value no cell computes yet: compute it there from the engine's trace), or, if the lesson sets it, allowlist it
with a reason. Counts from two to ten written as words ("two latencies", "three requests") are the prose counting
its own items and are not scanned; a fraction they start ("three quarters", "two thirds") is.
"""
from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from tinyserve.core.workloads import WORKLOADS
from tinyserve.lang import t

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ROOT / "chapters"
sys.path.insert(0, str(CHAPTERS))
try:
    import build
    import editions
finally:
    sys.path.remove(str(CHAPTERS))

# ------------------------------------------------------------------------------------------ what is a number
DIGITS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")  # "7", "0.5", "4,000", "1,000,000"
SUFFIX = re.compile(r"\s?%|×|x\b")  # what makes it a share or a factor ("99%", "80×", "4x")
WORD_VALUES = {"eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
               "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
               "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
               "hundreds": 100, "thousand": 1000, "thousands": 1000, "million": 1e6, "millions": 1e6,
               "dozen": 12, "dozens": 12}
FRACTIONS = r"\w+fold|half|halves|thirds?|quarters?|fifths?|tenths?"
WORDS = re.compile(rf"\b(?:{'|'.join(WORD_VALUES)}|{FRACTIONS})\b", re.I)

# ------------------------------------------------------------------------------------------ the rules
# SPANS: a number inside a span one of these patterns matches is allowed; the name is what a failure shows.
SPANS: dict[str, re.Pattern] = {
    # a value the notebook's code recorded (tinyserve.lang.glue); inline code, a code fence, a link's target
    "glued or code": re.compile(r"\{glue\}`[^`]*`|```.*?```|`[^`]*`|\]\([^)]*\)|<https?://[^>]*>", re.S),
    # a reference to a part of the book, a notebook or a figure: "Chapter 12", "Ch. 8", "§4", "section 4",
    # "sec. 7.2", "notebook 7.1", "Figure 3", "Figures 2 and 3", "Table 4", "Frames 2 to 4", "Exercise 2"
    "reference": re.compile(
        r"(?:\b(?:chapters?|ch\.|sections?|sec\.|notebooks?|figures?|fig\.|tables?|frames?|exercises?)\s*|§\s*)"
        r"\d+(?:\.\d+)?(?:\s*(?:,|and|to|–|-)\s*\d+(?:\.\d+)?)*", re.I),
    # a notebook's number ("7.3", "7.1's"; the notebooks are 7.0 to 7.7), not a quantity ("7.3 ms", "7.1%")
    "notebook number": re.compile(r"\b7\.[0-7]\b(?!\s?(?:%|×|x\b|ms\b|s\b|[KMGT]B\b|tokens?\b|steps?\b|times\b))"),
    # a heading's or a numbered list's own number ("## 1. Padding", "1. Why does ...")
    "numbering": re.compile(r"^#+\s+\d+\.|^\s*\d+\.\s", re.M),
    # a name with a number in it: a claim, a request or a slot ("F1", "S5", "r0", "x2"), a percentile ("p99"),
    # a machine, a model or a number format ("H200", "70B", "Llama-3", "fp8", "bf16", "float64", "64-bit",
    # "70-billion-parameter")
    "name": re.compile(r"\b[A-Za-z][A-Za-z_]*-?\d+(?:\.\d+)?[A-Za-z]*\b|\b\d+[A-Z]\b|\b\d+-bit\b|"
                       r"\b\d+-billion-parameter\b"),
    # a year after a month, a venue or "in" ("June 2023", "SOSP 2023", "in 2024"), not "2020 steps"
    "year": re.compile(r"\b(?:January|February|March|April|May|June|July|August|September|October|November|"
                       r"December|[A-Z]{3,}|in|since)\s+(?:19|20)\d\d\b(?![,.]\d)"),
    # a citation: an arXiv id, "et al. 2023", a venue and its year ("OSDI '24")
    "citation": re.compile(r"arXiv:\d{4}\.\d{4,5}|\bet al\.,? (?:19|20)\d\d|\b[A-Z]{3,}\s+'\d\d\b"),
    # an ordinal written as a word names an item, not a quantity: "the third sequence", "the fifth request"
    "ordinal": re.compile(r"\bthe (?:third|fifth|tenth)\b", re.I),
    # the points a rubric or a check cell awards ("1 point", "(3 points;")
    "points": re.compile(r"\b\d+ points?\b"),
}

# ATTRIBUTED: a sentence that attributes its numbers to the book ("the chapter: 31 of 32 slots ...") or to the
# source a gallery section redraws ("the paper", "the figure", "the page's last picture") quotes that source's
# own figures, typed as the source prints them; so does a block that opens by describing the cited figure.
ATTRIBUTED = re.compile(r"\bthe (?:book|chapter|paper|post|page|picture|figures?|drawing|frames)(?:'s)?\b", re.I)
DESCRIBES_SOURCE = re.compile(r"^\*\*What the (?:figures?|frames) shows?\.\*\*")

# VALUES (checked against the code, so a changed parameter fails here until the prose follows it; a share or a
# factor, "99%" or "80×", is a result, never one of these):
# "parameter": the value of a number literal in the notebook's own code (`batch_size=32`, `rate=0.5`, a list of
#   chunk lengths), outside plotting calls: a setting the lesson chooses and the text describes;
# "workload": a value that defines a workload the notebook names: a knob's default in
#   tinyserve.core.workloads.WORKLOADS, a number its description states (`tinyserve workloads`), or a field of
#   a gallery file (chapters/workloads/gallery-*.jsonl).
# A small number the code happens to use elsewhere (a 2, a 4) passes these too: a reviewer still reads for those.
PLOTTING = {"subplots", "plot", "barh", "bar", "text", "annotate", "set", "legend", "axvline", "axhline",
            "set_xlim", "set_ylim", "set_title", "tight_layout", "scatter", "fill_between", "stackplot",
            "set_xticks", "set_yticks", "colorbar", "step", "figure", "add_subplot"}

# ALLOWLIST: what remains typed on purpose, per notebook: (a snippet of a block, why its numbers are typed).
# Every number inside the snippet is allowed; a snippet no longer in its notebook fails (keep it short and true).
ALLOWLIST: dict[str, list[tuple[str, str]]] = {
    "7.1-static-batching": [
        ("(half finish sooner)", "the definition of the median (p50)"),
        ("At a fifth of the load", "the light rate the next cell sets (0.1 req/s) against this one (0.5 req/s)"),
    ],
    "7.2-continuous-batching": [
        ("a fifth of the requests", "the workload's definition: 20% long RAG completions (tinyserve workloads)"),
    ],
    "7.3-chunked-prefill": [
        ("a fifth with 800–2,500-token prompts", "the long-tail workload's definition (20% long RAG "
                                                   "completions, prompts of 800 to 2,500 tokens: core/workloads.py)"),
        ("slower than 99% of them", "the definition of p99"),
    ],
    "7.4-kv-bill": [
        ("8 KV heads × 128 dimensions × 80 layers", "the model's published shape (Llama 3 70B config.json, the "
                                                    "preset's source that 7.0 prints)"),
        ("ends after 60 tokens", "an illustrative short sequence (a typical chat prompt of the long-tail traffic)"),
        ("The H200 has 141 GB", "the H200's published memory (its datasheet, in the preset's description above)"),
        ("up to 255 empty positions", "the block size the sentence names, 256, minus one"),
        ("one 4-byte block id", "the size of a block id the sentence assumes (a 32-bit integer)"),
    ],
    "7.5-figures-you-know": [
        ("23x throughput", "the cited post's title"),
        ("arrive at 30 ms", "the gallery file's arrival_s of 0.03, in ms"),
        ("so 64 and 128 are capped", "the batch caps sweeps.capacity_settings() lines up (the table's B=64, B=128)"),
        ("and 128 slots", "the batch cap of sweeps.ablation_settings(), the ablation the next cell runs"),
    ],
    "7.6-appendix-evidence": [
        ("60–80% of the datasheet's peak", "what real kernels reach: the presets' stated efficiency assumption"),
        ("a quiet 2-core machine", "the machine the saved table was measured on (the table records no core count)"),
        ("by 17-23%", "an earlier fit's misses, kept in no saved table (benchmarks/README.md records them)"),
    ],
    "7.1-exercises": [
        ("a 50-token and a 4,000-token prompt", "the case the exercise fixes: the chapter's padding example"),
        ("batch size 2", "the small case the exercise fixes (outputs [4, 2])"),
    ],
    "7.3-exercises": [
        ("Budget 16, chunk size 8, three decodes, and two prompts still prefilling: 20 tokens of which 14 are "
         "done, and 30", "the case the exercise fixes"),
        ("a dozen requests", "the scenario's size in round words (long_prompt_measure draws 8 to 16 of them)"),
        ("from 64 to 2,048 tokens", "the range of chunk lengths the prediction asks about"),
        ("**50 ms**", "the service target the open question sets"),
        ("(e.g. 64 … 2,048)", "the rubric's example range of chunk lengths"),
        ("at most 50 ms", "the open question's target, in its rubric"),
    ],
    "7.4-exercises": [
        ("1,000,000 bytes of KV memory, `max_len` = 100 positions, 1,024 bytes per position", "the case the "
                                                                                              "exercise fixes"),
        ("Would 1,024,000 bytes", "the exercise's second case"),
        ("A 10-token prompt that has generated 1 token", "the case the exercise fixes"),
    ],
}


# --------------------------------------------------------------------------------------- the notebooks
@dataclass
class Notebook:
    """A learner notebook's English markdown cells and code cells."""
    markdown: list[str]
    code: list[str] = field(default_factory=list)


def learner_notebooks() -> dict[str, Notebook]:
    """{notebook: its cells}: the lessons (src/), the exercises (their solutions) and the widget demo."""
    out = {}
    for stem in editions.notebooks():
        src = CHAPTERS / "src" / f"{stem}.py"
        cells = (build.parse(src.read_text(encoding="utf-8")) if src.exists()
                 else nbformat.read(CHAPTERS / "solutions" / f"{stem}.ipynb", as_version=4).cells)
        out[stem] = Notebook([c.source for c in cells if c.cell_type == "markdown"],
                             [c.source for c in cells if c.cell_type == "code"])
    demo = nbformat.read(ROOT / "widgets" / "demo.ipynb", as_version=4).cells
    out["widgets/demo"] = Notebook([c.source for c in demo if c.cell_type == "markdown"],
                                   [c.source for c in demo if c.cell_type == "code"])
    return out


def code_values(code: list[str]) -> set[float]:
    """The number literals of a notebook's code cells, outside plotting calls (figure sizes, font sizes)."""
    out: set[float] = set()

    def walk(node):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in PLOTTING:
            return
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            out.add(float(node.value))
        for child in ast.iter_child_nodes(node):
            walk(child)

    for source in code:
        try:
            walk(ast.parse(source))
        except SyntaxError:  # a cell with IPython syntax: its literals are not needed
            continue
    return out


def workload_values(nb: Notebook) -> set[float]:
    """The values that define the workloads a notebook names (knob defaults, description, gallery fields)."""
    text = "\n".join(nb.markdown + nb.code)
    out: set[float] = set()
    for name, (about, _builder, knobs) in WORKLOADS.items():
        if name in text:
            out |= {float(default) for default, *_ in knobs.values()}
            out |= {value(m.group()) for m in DIGITS.finditer(t(about, lang="en"))
                    if not re.match(r"[\w.]", t(about, lang="en")[m.start() - 1:m.start()])}  # not "F4"
    for name in set(re.findall(r"gallery-([a-z-]+)(?:\.jsonl|\b)", text)):
        path = CHAPTERS / "workloads" / f"gallery-{name}.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else ():
            out |= {float(v) for v in json.loads(line).values() if type(v) in (int, float)}
    return out


# ------------------------------------------------------------------------------------------ the scan
def value(text: str) -> float | None:
    """The value of a number as the prose writes it ("4,000" -> 4000, "99%" -> 99, "thirty" -> 30)."""
    word = WORD_VALUES.get(text.lower())
    if word is not None:
        return float(word)
    m = DIGITS.match(text)
    return float(m.group().replace(",", "")) if m else None


def numbers(block: str):
    """(start, end, text) of each number in a block: digits (with a following %, × or x) and number words."""
    for m in DIGITS.finditer(block):
        suffix = SUFFIX.match(block, m.end())
        end = suffix.end() if suffix else m.end()
        yield m.start(), end, block[m.start():end]
    for m in WORDS.finditer(block):
        yield m.start(), m.end(), m.group()


_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(\[_`{\"])|\n")


def sentence_at(block: str, pos: int) -> str:
    """The sentence (or list line, or table row) of a block around a position."""
    start = max([0] + [m.end() for m in _BREAK.finditer(block) if m.end() <= pos])
    end = min([len(block)] + [m.start() for m in _BREAK.finditer(block) if m.start() >= pos])
    return block[start:end].strip()


def offences(notebooks: dict[str, Notebook] | None = None,
             allowlist: dict[str, list[tuple[str, str]]] | None = None) -> tuple[list[str], list[str]]:
    """(each typed number no rule allows: "notebook, block n: 'number' in: sentence", each stale allowlist entry)."""
    notebooks = learner_notebooks() if notebooks is None else notebooks
    allowlist = ALLOWLIST if allowlist is None else allowlist
    bad, used = [], set()
    for stem, nb in notebooks.items():
        known = code_values(nb.code) | workload_values(nb)
        blocks = [b for cell in nb.markdown for b in editions.blocks(cell)]
        for i, block in enumerate(blocks, 1):
            spans = [m.span() for rule in SPANS.values() for m in rule.finditer(block)]
            for snippet, _why in allowlist.get(stem, ()):
                for m in re.finditer(re.escape(snippet), block):
                    spans.append(m.span())
                    used.add((stem, snippet))
            if DESCRIBES_SOURCE.match(block):
                continue
            for start, end, text in sorted(numbers(block)):
                if any(a <= start and end <= b for a, b in spans):
                    continue
                if not SUFFIX.search(text) and value(text) in known:  # a share or a factor is never a setting
                    continue
                sentence = sentence_at(block, start)
                if not ATTRIBUTED.search(sentence):
                    bad.append(f"{stem}, block {i}: {text!r} in: {sentence}")
    stale = [f"{stem}: allowlisted {snippet!r} is not in the notebook" for stem, entries in allowlist.items()
             for snippet, _ in entries if (stem, snippet) not in used]
    return bad, stale


# ---------------------------------------------------------------------------------------------- tests
def test_every_number_in_the_learner_prose_is_glued_or_allowed():
    bad, stale = offences()
    assert not bad, ("numbers typed in the prose (glue them from the code that computes them, or allowlist "
                     "them in tests/chapters/test_prose_numbers.py with a reason):\n" + "\n".join(bad))
    assert not stale, "\n".join(stale)


def test_the_allowlist_says_why():
    notebooks = learner_notebooks()
    for stem, entries in ALLOWLIST.items():
        assert stem in notebooks, stem
        for snippet, why in entries:
            assert DIGITS.search(snippet) or WORDS.search(snippet), (stem, snippet)
            assert len(why.split()) >= 3, (stem, snippet, why)


def test_the_scan_finds_every_kind_of_typed_number_and_spares_the_allowed_ones():
    prose = ("The worst, {glue}`pct`% low. It took 1,234 steps, 0.5 s, 17% and 4x (3.5× a plain step). "
             "Sixteen steps ran; thirty users waited; three quarters were thrown away. "
             "See Chapter 12, Ch. 8, §4, section 4 and notebook 7.1; the H200 with a 70B model in fp8; F1 and p99; "
             "`batch_size=32` and 64 slots; 63 requests; Kwon et al. 2023, arXiv:2403.02310, OSDI '24, SOSP 2023. "
             "It took 2020 steps and 7.3 ms. "
             "The third request waits.\n\n"
             "The chapter: 31 of 32 slots spend 99% of the time on waste.\n\n"
             "## 2. Padding\n\nA batch of B = 4 requests.")
    code = 'engine.run("chapter-7.1-finisher", "static", batch_size=64)\nax.plot(x, y, lw=17)'
    nb = {"7.9-demo": Notebook([prose], [code])}
    bad, stale = offences(nb, {"7.9-demo": [("B = 4", "the exercise fixes it")]})
    found = [b.split(": ", 1)[1].split(" in: ")[0] for b in bad]
    assert found == ["'1,234'", "'0.5'", "'17%'", "'4x'", "'3.5×'", "'Sixteen'", "'thirty'", "'quarters'", "'2020'",
                     "'7.3'"]
    assert "7.9-demo, block 1: '1,234' in: It took 1,234 steps, 0.5 s, 17% and 4x (3.5× a plain step)." in bad
    assert stale == []
    # a parameter the code no longer sets, a workload the notebook no longer names: typed again
    bad, _ = offences({"7.9-demo": Notebook(["64 slots; 63 requests."], ["run(batch_size=32)"])}, {})
    assert [b.split(" in: ")[0] for b in bad] == ["7.9-demo, block 1: '64'", "7.9-demo, block 1: '63'"]
    assert offences({"7.9-demo": Notebook(["Nothing."])}, {"7.9-demo": [("B = 4", "gone")]})[1] == [
        "7.9-demo: allowlisted 'B = 4' is not in the notebook"]
