"""The translated editions' words: one gettext catalog per notebook, keyed by the English markdown blocks.

    chapters/locale/zh_TW/<stem>.po    msgid = one English block, msgstr = its 繁體中文 (stem: "7.1-static-batching",
                                       "7.1-exercises")

A block is what a blank line separates in a markdown cell: a prose paragraph, a heading, a list, a table, a
code fence. Both sides are stored unwrapped: the hard line breaks inside a paragraph or a list item are joined
(by a space, or by nothing between two CJK characters, where a break drew as a stray space), while headings,
list items, table rows and fences keep their lines. The English comes from chapters/src/<stem>.py (the lessons)
or chapters/solutions/<stem>.ipynb (the exercises), freshly extracted each time, so a changed English block finds
no entry and the build and the tests stop until its translation is reviewed. Read and written with Babel;
Babel's parser accepts some broken lines (a string that lost its closing quote vanishes), so every line is
checked first and an error names the file and the line.

The docstrings of the code cells are entries too (msgctxt "docstring", msgid = the docstring's text as written
between its quotes, its lines joined by a space): the edition swaps the text between the quotes for the translation
(one line, wrapped to COMMENT_COLUMNS at the docstring's indentation), the quotes and the code around them kept.

The comments of the code cells are entries too (msgctxt "comment", msgid = the English comment's text: a trailing
`# ...`, or a run of whole-line `# ...` lines at one indentation joined into one text), so every comment of the
edition is in its language while the code stays one source: the edition swaps only the comment text, every other
character of a code cell is the English source's (nbval checks the same numbers). Machine markers are not
translated and have no entry (MARKERS: nbval's NBVAL_CHECK_OUTPUT, NBVAL_IGNORE_OUTPUT, NBVAL_SKIP, ...,
nbgrader's BEGIN/END SOLUTION and BEGIN/END HIDDEN TESTS, linters' noqa, type: ignore, pragma, fmt:); a
comment that starts with the words-lint marker `words: ok` (tests/lang/test_strings_in_table.py) keeps it in
front of its translated reason. A translation is one line; a long one is wrapped (between CJK characters) to
COMMENT_COLUMNS.
"""
from __future__ import annotations

import io
import re
import tokenize
from datetime import datetime, timezone
from pathlib import Path

from tinyserve.lang import catalogs
from tinyserve.lang.catalogs import CatalogError  # noqa: F401  (build.py and the tests catch it here)

HERE = Path(__file__).resolve().parent
LOCALE = HERE / "locale"
FOLDERS = {"zh-TW": "zh_TW"}  # an edition -> its catalogs' folder (gettext's locale name)
GLUE = re.compile(r"\{glue\}`([^`]+)`")  # MyST-NB's role: a value the notebook's code recorded (tinyserve.lang.glue)
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")  # and CJK punctuation
FENCE = re.compile(r"\s*(```|~~~)")
# a line that starts a line of its own in an unwrapped block: a heading, a list item, a table row, a fence
OWN_LINE = re.compile(r"\s*(#{1,6}\s|[-*+]\s|\d+[.)]\s|\||```|~~~)")
COMMENT = "comment"  # the msgctxt of a code comment's entry
DOCSTRING = "docstring"  # the msgctxt of a docstring's entry
# comments read by machines, never translated (the text after the #s, whole)
MARKERS = re.compile(r"(NBVAL_[A-Z_]+|(BEGIN|END) (SOLUTION|HIDDEN TESTS)|noqa\b.*|type: ?ignore.*|pragma\b.*"
                     r"|fmt: ?(on|off|skip)|words: ok|-\*-.*-\*-|%%.*)")
WORDS_OK = "words: ok"  # a translated reason keeps this marker in front: `# words: ok (why)`
COMMENT_COLUMNS = 100  # a translated whole-line comment is wrapped to this many display columns


# ----------------------------------------------------------------------------------------------- the blocks
def blocks(markdown: str) -> list[str]:
    """The blank-line separated blocks of a markdown cell, unwrapped (a code fence is one block, blank lines too)."""
    out, cur, fenced = [], [], False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        if not line.strip() and not fenced:
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append(line)
    if cur:
        out.append(cur)
    return [unwrap("\n".join(b)) for b in out]


def unwrap(block: str) -> str:
    """A block with its paragraphs' and list items' hard line breaks joined (headings, items, rows, fences kept)."""
    if FENCE.match(block):
        return block
    lines: list[str] = []
    for line in block.split("\n"):
        if not lines or OWN_LINE.match(line) or OWN_LINE.match(lines[-1]) and not _item(lines[-1]):
            lines.append(line.rstrip())
        else:
            prev, nxt = lines[-1].rstrip(), line.strip()
            lines[-1] = prev + ("" if CJK.match(prev[-1:]) and CJK.match(nxt[:1]) else " ") + nxt
    return "\n".join(lines)


def _item(line: str) -> bool:
    """A list item (its continuation lines join it), as opposed to a heading, row or fence (which stand alone)."""
    return bool(re.match(r"\s*([-*+]|\d+[.)])\s", line))


def glue_names(text: str) -> set[str]:
    """The names of the {glue}`name` roles in a text."""
    return set(GLUE.findall(text))


# -------------------------------------------------------------------------------------------- the English
def _english(stem: str, root: Path, kind: str) -> list[str]:
    """The sources of an English notebook's cells of one kind: src/<stem>.py (a lesson) or
    solutions/<stem>.ipynb (exercises)."""
    src = root / "src" / f"{stem}.py"
    if src.exists():
        from build import parse
        cells = parse(src.read_text(encoding="utf-8"))
    else:
        import nbformat
        cells = nbformat.read(root / "solutions" / f"{stem}.ipynb", as_version=4).cells
    return [c.source for c in cells if c.cell_type == kind]


def english_cells(stem: str, root: Path = HERE) -> list[str]:
    """The markdown cells of an English notebook: src/<stem>.py (a lesson) or solutions/<stem>.ipynb (exercises)."""
    return _english(stem, root, "markdown")


def keys(cells: list[str]) -> list[list[tuple[str, str | None]]]:
    """Per cell, per block, its catalog key (msgid, msgctxt): the n-th repeat of a block in a notebook may have
    a translation of its own under msgctxt "n" (looked up there first, then without a context)."""
    seen: dict[str, int] = {}
    out = []
    for cell in cells:
        row = []
        for b in blocks(cell):
            seen[b] = seen.get(b, 0) + 1
            row.append((b, str(seen[b]) if seen[b] > 1 else None))
        out.append(row)
    return out


def notebooks(root: Path = HERE) -> list[str]:
    """The stems of every notebook that has an edition: the lessons and the exercises."""
    return sorted([p.stem for p in (root / "src").glob("7.*.py")]
                  + [p.stem for p in (root / "solutions").glob("7.*.ipynb")])


# ------------------------------------------------------------------------------------- the code comments
def english_code(stem: str, root: Path = HERE) -> list[str]:
    """The code cells of an English notebook (a lesson's source or the exercises' solutions)."""
    return _english(stem, root, "code")


def comments(source: str) -> list[tuple[int, int, int, str, bool]]:
    """The comments of a code cell to translate: (first line, last line, column, text, trailing), lines counted
    from 0; a run of whole-line comments at one column is one comment (its lines' texts joined by a space);
    machine markers (MARKERS) are left out, and they end a run."""
    lines = source.split("\n")
    # magics and shell lines are not Python: blanked for the tokenizer (their lines keep their numbers)
    text = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)
    found: list[tuple[int, int, str]] = []  # (line, column, the comment token)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                found.append((tok.start[0] - 1, tok.start[1], tok.string))
    except (tokenize.TokenError, SyntaxError):  # code that does not tokenize: its whole-line comments
        found = [(i, len(ln) - len(ln.lstrip()), ln.strip()) for i, ln in enumerate(lines)
                 if ln.lstrip().startswith("#")]
    out: list[tuple[int, int, int, str, bool]] = []
    for line, col, tok in found:
        body = tok.lstrip("#").strip()
        if not body or MARKERS.fullmatch(body):
            out.append((line, line, col, "", False))  # a marker: ends a run, has no entry
            continue
        trailing = bool(lines[line][:col].strip())
        prev = out[-1] if out else None
        if (not trailing and prev and prev[3] and not prev[4] and prev[1] == line - 1 and prev[2] == col
                and not prev[3].startswith(WORDS_OK)):
            out[-1] = (prev[0], line, col, prev[3] + " " + body, False)
        else:
            out.append((line, line, col, body, trailing))
    return [c for c in out if c[3]]


def _python(source: str) -> str:
    """A code cell as Python: magics and shell lines blanked (their lines keep their numbers)."""
    return "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.split("\n"))


def docstrings(source: str) -> list[tuple[int, int, int, int, str, str]]:
    """The docstrings of a code cell to translate: (first line, last line, start column, end column, quote, text),
    lines counted from 0, columns in characters; the text as written between the quotes, its lines joined by a
    space. A docstring is the first statement of a module, class or function when it is a plain string literal
    (no prefix such as r or f); a cell that does not parse has none."""
    import ast

    lines = source.split("\n")
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) or not node.body:
            continue
        first = node.body[0]
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            continue
        v = first.value
        a, b = v.lineno - 1, v.end_lineno - 1
        col = len(lines[a].encode("utf-8")[:v.col_offset].decode("utf-8"))  # ast counts bytes
        end = len(lines[b].encode("utf-8")[:v.end_col_offset].decode("utf-8"))
        literal = "\n".join(lines[a:b + 1])[col:len("\n".join(lines[a:b])) + (1 if b > a else 0) + end]
        quote = next((q for q in ('"""', "'''", '"', "'") if literal.startswith(q) and literal.endswith(q)
                      and len(literal) >= 2 * len(q)), None)
        if quote is None:  # a prefix (r"...") or implicit concatenation: left as it is
            continue
        text = " ".join(literal[len(quote):len(literal) - len(quote)].split())
        if text:
            out.append((a, b, col, end, quote, text))
    return sorted(out)


def docstring_ids(sources: list[str]) -> list[str]:
    """The msgids of every docstring of these code cells, in order, each once."""
    return list(dict.fromkeys(d[5] for src in sources for d in docstrings(src)))


def swap_docstrings(source: str, translate) -> str:
    """A code cell with every docstring's text replaced by translate(text) (a one-line string), wrapped to
    COMMENT_COLUMNS at the docstring's column; its quotes and every other character of the cell kept."""
    lines = source.split("\n")
    for first, last, col, end, quote, text in reversed(docstrings(source)):
        new = " ".join(translate(text).split())
        lead, tail = lines[first][:col], lines[last][end:]
        room = max(20, COMMENT_COLUMNS - col - 2 * len(quote))
        held = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\ue000"), new)
        parts = [part.replace("\ue000", " ") for part in wrap_comment(held, room)]
        if len(parts) > 1 and len(quote) == 1:  # a one-quote string cannot span lines: one long line then
            parts = [" ".join(parts)]
        body = [lead + quote + parts[0]] + [" " * col + part for part in parts[1:]]
        body[-1] += quote + tail
        lines[first:last + 1] = body
    return "\n".join(lines)


def comment_ids(sources: list[str]) -> list[str]:
    """The msgids of every comment of these code cells, in order, each once."""
    return list(dict.fromkeys(c[3] for src in sources for c in comments(src)))


def swap_comments(source: str, translate) -> str:
    """A code cell with every comment's text replaced by translate(text) (a one-line string); the code, every
    marker and every character before a comment's # kept as they are."""
    lines = source.split("\n")
    for first, last, col, text, trailing in reversed(comments(source)):
        new = " ".join(translate(text).split())
        lead = lines[first][:col]
        if trailing:
            lines[first] = lead + "# " + new
            continue
        room = max(20, COMMENT_COLUMNS - col - 2)
        # a `code span` is never broken: its spaces are held as a private-use character while wrapping
        held = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\ue000"), new)
        lines[first:last + 1] = [lead + "# " + part.replace("\ue000", " ") for part in wrap_comment(held, room)]
    return "\n".join(lines)


BREAK_AFTER = set("，。、；：！？）」』》〉")  # a Chinese line may end after these: never inside a word
NO_START = set("，。、；：！？）」』》〉,.;:!?)]}%")


def wrap_comment(text: str, columns: int) -> list[str]:
    """Lines of at most `columns` display columns, broken at a space or after full-width punctuation; between two
    Chinese characters (which may be one word: 序列, 最差) only where a line has neither."""
    from tinyserve.lang import width

    lines = []
    while width(text) > columns:
        good = between = None
        cols = 0
        for i, ch in enumerate(text):
            cols += width(ch)
            if cols > columns:
                break
            nxt = text[i + 1:i + 2]
            if nxt in NO_START:
                continue
            if ch == " " or ch in BREAK_AFTER:
                good = i + 1
            elif CJK.match(ch) and CJK.match(nxt):
                between = i + 1
        cut = good or between or text.find(" ", 1) + 1 or len(text)
        lines.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    return lines + [text] if text or not lines else lines


# ------------------------------------------------------------------------------------------ the catalogs
def catalog_path(stem: str, lang: str, root: Path = HERE) -> Path:
    """chapters/locale/<folder>/<stem>.po."""
    return root / "locale" / FOLDERS[lang] / f"{stem}.po"


def read(path: Path):
    """The babel Catalog of a .po file, its fuzzy entries' old English kept; CatalogError("file:line: why") on a
    malformed one (every line checked first, as the package's catalogs are: tinyserve.lang.catalogs.read)."""
    catalog = catalogs.read(path, unique_contexts=False)  # every comment's entry has msgctxt "comment"
    for m in catalog:
        _set_flags(m)
        _take_previous(m)
    return catalog


def write(catalog, path: Path) -> None:
    """Write a catalog unwrapped (width 0: an editor wraps for display), with fuzzy entries' old English."""
    from babel.messages.pofile import write_po

    out = io.BytesIO()
    write_po(out, catalog, width=0, no_location=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_put_previous(out.getvalue().decode("utf-8"), catalog), encoding="utf-8")


# Babel 2.19 reads a fuzzy entry's old English ("#| msgid ...", which Poedit shows beside the new) as a comment,
# and writes it wrapped at 76 columns without quotes, which no reader parses back; so both are done here.
def _take_previous(message) -> None:
    """Move the "#| msgid" lines Babel read as comments into message.previous_id."""
    from babel.messages.pofile import denormalize

    lines = [c[1:].strip() for c in message.user_comments if c.startswith("|")]
    if lines and lines[0].startswith("msgid "):
        message.previous_id = [denormalize("\n".join([lines[0][6:], *lines[1:]]))]
        message.user_comments = [c for c in message.user_comments if not c.startswith("|")]


def _put_previous(text: str, catalog) -> str:
    """Insert each fuzzy entry's old English as "#| msgid" lines above its msgctxt/msgid."""
    from babel.messages.pofile import normalize

    for m in catalog:
        if m.id and m.fuzzy and m.previous_id:
            head = f"msgid {normalize(m.id, width=0)}\n"
            if m.context:
                head = f"msgctxt {normalize(m.context, width=0)}\n" + head
            prev = "".join(f"#| {ln}\n" for ln in f"msgid {normalize(m.previous_id[0], width=0)}".split("\n"))
            text = text.replace("\n" + head, "\n" + prev + head, 1)
    return text


def new_catalog(stem: str, lang: str):
    """An empty catalog for one notebook's edition, with a header Poedit and msgfmt read."""
    from babel.messages.catalog import Catalog

    now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    catalog = Catalog(locale=FOLDERS[lang], domain=stem, project="tinyserve chapter 7", version=stem,
                      language_team=f"{lang} (chapters/README.md)", fuzzy=False,
                      creation_date=now, revision_date=now)
    catalog.header_comment = (f"# {lang} edition of chapters/{stem}: one entry per English markdown block.\n"
                              "# Keep every {glue}`name` as it is; chapters/README.md says how to edit and rebuild.")
    return catalog


def _set_flags(message) -> None:
    """Flags set here, not guessed: Babel marks prose such as "within 10% of" python-format and `{"n": 20}`
    python-brace-format, which markdown is not; a block with {glue} roles is flagged "glue" (keep its names)."""
    if not message.id:
        return
    message.flags -= {"python-format", "python-brace-format"}
    if glue_names(message.id):
        message.flags.add("glue")
    else:
        message.flags.discard("glue")


def template(stem: str, root: Path = HERE):
    """The catalog of a notebook's English blocks, untranslated (what --update merges in)."""
    from babel.messages.catalog import Catalog

    catalog = Catalog(fuzzy=False)
    for row in keys(english_cells(stem, root)):
        for msgid, ctxt in row:
            if ctxt is None:  # a repeat has its own entry only where its translation differs (a translator adds it)
                _set_flags(catalog.add(msgid))
    for msgid in comment_ids(english_code(stem, root)):
        _set_flags(catalog.add(msgid, context=COMMENT))
    for msgid in docstring_ids(english_code(stem, root)):
        _set_flags(catalog.add(msgid, context=DOCSTRING))
    return catalog


def update(stem: str, lang: str, root: Path = HERE) -> str:
    """Merge the current English blocks into a notebook's catalog: new ones untranslated, changed ones fuzzy
    (Babel's fuzzy matching, the old English kept as #| msgid), vanished ones obsolete (#~); a summary line."""
    path = catalog_path(stem, lang, root)
    catalog = read(path) if path.exists() else new_catalog(stem, lang)
    before = {(m.id, m.context): (m.string, m.fuzzy) for m in catalog if m.id}
    # a repeat's own translation (msgctxt "n") is kept while the notebook still repeats the block that often
    own = [m for m in catalog if m.id and m.context and m.context not in (COMMENT, DOCSTRING)]
    for m in own:
        catalog.delete(m.id, context=m.context)
    catalog.update(template(stem, root), update_creation_date=False)
    wanted = {(b, c) for row in keys(english_cells(stem, root)) for b, c in row}
    for m in own:
        if (m.id, m.context) in wanted:
            catalog[m.id] = m
        else:
            catalog.obsolete[(m.id, m.context)] = m
    for m in catalog:
        if m.id and m.context == COMMENT and not m.auto_comments:
            m.auto_comments = ["a comment in a code cell: one line, no Markdown"]
        if m.id and m.context == DOCSTRING and not m.auto_comments:
            m.auto_comments = ["a docstring in a code cell: one line, no Markdown, no quotes or backslashes"]
        _set_flags(m)
    after = {(m.id, m.context): (m.string, m.fuzzy) for m in catalog if m.id}
    new = sum(1 for k, (s, f) in after.items() if k not in before and not s)
    fuzzy = sum(1 for k, (s, f) in after.items() if f and before.get(k) != (s, f))
    if after != before or catalog.obsolete:
        catalog.revision_date = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    write(catalog, path)
    return (f"{path.relative_to(root.parent)}: {len(after)} entries, {new} new (untranslated), {fuzzy} fuzzy, "
            f"{len(catalog.obsolete)} obsolete")


def lookup(catalog, msgid: str, ctxt: str | None):
    """The entry for a block (a repeat's own context first)."""
    return (ctxt and catalog.get(msgid, ctxt)) or catalog.get(msgid)


def render(cells: list, stem: str, lang: str, root: Path = HERE) -> None:
    """Swap every markdown cell of a notebook for its translation, block by block; CatalogError naming the
    notebook, the catalog and the block's first words where an entry is missing, untranslated or fuzzy."""
    path = catalog_path(stem, lang, root)
    if not path.exists():
        raise CatalogError(f"{stem}: no catalog {path.relative_to(root.parent)} "
                           f"(start one: python chapters/build.py --lang {lang} --update {stem})")
    catalog, where = read(path), path.relative_to(root.parent)
    md = [c for c in cells if c.cell_type == "markdown"]
    for cell, row in zip(md, keys([c.source for c in md])):
        out = []
        for msgid, ctxt in row:
            out.append(_translation(lookup(catalog, msgid, ctxt), msgid, "", stem, where, lang))
        cell.source = "\n\n".join(out)
    for cell in cells:
        if cell.cell_type == "code":
            cell.source = swap_docstrings(cell.source, lambda text: _translation(
                catalog.get(text, DOCSTRING), text, "the docstring ", stem, where, lang))
            cell.source = swap_comments(cell.source, lambda text: _translation(
                catalog.get(text, COMMENT), text, "the comment ", stem, where, lang))


def _translation(m, text: str, what: str, stem: str, where, lang: str) -> str:
    """The reviewed translation of a block or a comment (`what` names the kind); CatalogError naming the file,
    the line and what to do when it has none, or an untranslated or fuzzy one."""
    if m is None:
        raise CatalogError(f"{stem}: {where}: no entry for {what}{first_words(text)!r} (run: python "
                           f"chapters/build.py --lang {lang} --update {stem}, then translate it)")
    if not m.string or m.fuzzy:
        why, todo = (("fuzzy", "review it, then remove the fuzzy mark") if m.string
                     else ("untranslated", "translate it"))
        raise CatalogError(f"{stem}: {where}:{m.lineno}: {why}: {what}{first_words(text)!r} ({todo})")
    return m.string


def first_words(text: str, n: int = 8) -> str:
    """The first few words of a block, to name it in a message."""
    words = text.split()
    return " ".join(words[:n]) + (" ..." if len(words) > n else "")


def problems(stem: str, lang: str, root: Path = HERE) -> list[str]:
    """What keeps a catalog from rendering its notebook as it is now: an English block with no entry, an entry
    for English the notebook no longer has, an untranslated or fuzzy entry, a {glue} name dropped or added."""
    path = catalog_path(stem, lang, root)
    where = str(path.relative_to(root.parent))
    if not path.exists():
        return [f"{where}: missing"]
    catalog = read(path)
    wanted = {(b, c) for row in keys(english_cells(stem, root)) for b, c in row}
    out = [f"{where}: no entry for {first_words(b)!r}" for b in sorted({b for b, c in wanted if c is None})
           if catalog.get(b) is None]
    said = comment_ids(english_code(stem, root))
    wanted |= {(c, COMMENT) for c in said}
    out += [f"{where}: no entry for the comment {first_words(c)!r}" for c in said if catalog.get(c, COMMENT) is None]
    documented = docstring_ids(english_code(stem, root))
    wanted |= {(d, DOCSTRING) for d in documented}
    out += [f"{where}: no entry for the docstring {first_words(d)!r}" for d in documented
            if catalog.get(d, DOCSTRING) is None]
    for m in catalog:
        if not m.id:
            continue
        at = f"{where}:{m.lineno}"
        if (m.id, m.context) not in wanted:
            out.append(f"{at}: the English is not in {stem} (changed or removed): {first_words(m.id)!r}")
        elif not m.string:
            out.append(f"{at}: untranslated: {first_words(m.id)!r}")
        elif m.fuzzy:
            out.append(f"{at}: fuzzy (review it, then remove the fuzzy mark): {first_words(m.id)!r}")
        elif m.context in (COMMENT, DOCSTRING) and "\n" in m.string:
            out.append(f"{at}: a {m.context}'s translation is one line (the build wraps it): {first_words(m.id)!r}")
        elif m.context == DOCSTRING and ("\\" in m.string or '"' in m.string or "'" in m.string):
            out.append(f"{at}: a docstring's translation holds no quote or backslash (it goes between the "
                       f"English quotes): {first_words(m.id)!r}")
        elif m.context == COMMENT and MARKERS.fullmatch(m.string.lstrip("#").strip()):
            out.append(f"{at}: a comment's translation is only a marker: {first_words(m.id)!r}")
        elif m.context == COMMENT and m.id.startswith(WORDS_OK) and not m.string.startswith(WORDS_OK):
            out.append(f"{at}: keep the marker {WORDS_OK!r} in front of the translated reason: {first_words(m.id)!r}")
        elif glue_names(m.id) != glue_names(m.string):
            out.append(f"{at}: {{glue}} names {sorted(glue_names(m.string))} in the translation, "
                       f"{sorted(glue_names(m.id))} in the English: {first_words(m.id)!r}")
    return out
