"""Chinese in figures: with tinyserve's font fallback it draws; a glyph the font lacks fails the notebook run."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
from tinyserve import lang
from tinyserve.lang import fonts

ROOT = Path(__file__).resolve().parents[2]

FIGURE = """import matplotlib
matplotlib.use("module://matplotlib_inline.backend_inline")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(2, 1))
ax.set_title("每個位子一段 slab")
plt.show()"""


def run_nbval(tmp_path: Path, first_cell: str) -> subprocess.CompletedProcess:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(first_cell), nbformat.v4.new_code_cell(FIGURE)]
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    path = tmp_path / "probe.ipynb"
    path.write_text(nbformat.writes(nb))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "chapters"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "nbfonts",
                           "--nbval-lax", "--nbval-current-env", "-c", os.devnull, "--rootdir", str(tmp_path),
                           str(path)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def test_a_figure_in_chinese_draws_with_the_fallback_and_fails_without_it(tmp_path):
    # without a CJK family in matplotlib's list the glyphs are missing: the cell fails
    bare = run_nbval(tmp_path, 'import matplotlib\nmatplotlib.rcParams["font.sans-serif"] = ["DejaVu Sans"]')
    assert bare.returncode != 0 and "missing from font" in bare.stdout, bare.stdout[-2000:]
    # tinyserve.set_language("zh-TW") puts a Traditional Chinese family behind DejaVu Sans: it passes
    ok = run_nbval(tmp_path, 'import tinyserve\ntinyserve.set_language("zh-TW")')
    assert ok.returncode == 0, ok.stdout[-2000:]


def test_the_ci_machine_has_a_traditional_chinese_font():
    """.ci/run and binder/apt.txt install fonts-noto-cjk; without it every zh-TW figure would show boxes."""
    assert fonts.installed_families(), "no CJK font: apt-get install fonts-noto-cjk"
    assert fonts.installed_families()[0] == "Noto Sans CJK TC"


def test_without_a_cjk_font_the_notebook_runs_and_says_once_how_to_install_one(monkeypatch, capsys):
    monkeypatch.setattr(fonts, "installed_families", lambda: [])
    monkeypatch.setitem(fonts._warned, "done", False)
    try:
        lang.set_language("zh-TW")
        lang.set_language("zh-TW")
    finally:
        lang.set_language("en")
    err = capsys.readouterr().err
    assert err.count("fonts-noto-cjk") == 2 and err.count("\n") == 2  # one hint: an English and a Chinese line
    assert "No Chinese font" in err and "找不到中文字型" in err


def test_plotly_names_traditional_chinese_families_first_among_cjk():
    stack = fonts.plotly_family("zh-TW")
    assert stack.index("Noto Sans CJK TC") < stack.index("Microsoft JhengHei") and stack.endswith("sans-serif")
    assert "CJK" not in fonts.plotly_family("en")
