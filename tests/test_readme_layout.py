"""README's Layout names only paths that exist: the tree in its code block (each line's name under the folders
above it, by indentation) and every backticked path or relative link in the section's prose (from the repository
root, or from lib/tinyserve/ as the prose says `core/`). Quick: it reads files, no torch."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lib" / "tinyserve"
# a tree line: its indentation, then one or more names ("errors.py" or "core/", comma-separated), two spaces, words
NAME = r"[\w.-]+(?:/[\w.-]+)*/?"
ENTRY = re.compile(rf"(?P<indent> *)(?P<names>{NAME}(?:, {NAME})*)(?:  +\S.*)?")
PATHLIKE = re.compile(r"[\w.-]+(?:/[\w.-]*)+|[\w-]+\.(?:py|md|ipynb|txt|toml|json|jsonl|cfg|sh)")


def layout_section(text: str) -> str:
    """The text of README's "## Layout" section, up to the next "## " heading."""
    m = re.search(r"^## Layout\n(.*?)(?=^## )", text, flags=re.M | re.S)
    assert m, 'README.md has no "## Layout" section followed by another section'
    return m.group(1)


def tree_paths(block: str) -> list[str]:
    """The repository paths a tree names: 'lib/tinyserve/' then '  core/' then '    kv.py' is lib/tinyserve/core/kv.py."""
    out, stack = [], []  # stack: (indent, folder) of the folders open above this line
    for line in block.splitlines():
        if not line.strip():
            continue
        m = ENTRY.fullmatch(line)
        assert m, f"a Layout tree line that is not 'NAME  what it is': {line!r}"
        indent = len(m["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = "".join(folder for _, folder in stack)
        names = m["names"].split(", ")
        out += [parent + name for name in names]
        if len(names) == 1 and names[0].endswith("/"):
            stack.append((indent, names[0]))
    return out


def prose_paths(prose: str) -> list[str]:
    """Backticked paths and relative links of the prose (not URLs, not anchors)."""
    found = [p for code in re.findall(r"`([^`\n]+)`", prose) if PATHLIKE.fullmatch(code) for p in [code]]
    found += [link.split("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", prose)
              if not re.match(r"[a-z]+:|#", link)]
    return found


def sections() -> tuple[list[str], list[str]]:
    text = layout_section((ROOT / "README.md").read_text(encoding="utf-8"))
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    return [p for b in blocks for p in tree_paths(b)], prose_paths(prose)


def test_the_tree_reader_reads_nesting_and_lists():
    block = ("lib/tinyserve/\n  errors.py, lang/   the error type; t()\n  core/        torch-free\n"
             "    kv.py      the pool\n  loop.py      the loop\nchapters/     the notebooks\n")
    assert tree_paths(block) == ["lib/tinyserve/", "lib/tinyserve/errors.py", "lib/tinyserve/lang/",
                                 "lib/tinyserve/core/", "lib/tinyserve/core/kv.py", "lib/tinyserve/loop.py",
                                 "chapters/"]
    assert prose_paths("`tests/test_layers.py` and `core/`, [a](docs/contract.md#x), [b](https://x.y/z), "
                       "`--clock wall`, `Run.step`") == ["tests/test_layers.py", "core/", "docs/contract.md"]


def test_every_path_the_layout_names_exists():
    tree, prose = sections()
    assert len(tree) >= 20 and "lib/tinyserve/loop.py" in tree, tree
    missing = [p for p in tree if not (ROOT / p).exists()]
    missing += [p for p in prose if not ((ROOT / p).exists() or (PACKAGE / p).exists())]
    assert not missing, f"README's Layout names paths that do not exist: {missing}"
