"""Fonts that draw Traditional Chinese: matplotlib's fallback list, plotly's font stack, one hint if none.

Traditional Chinese families first, so a system that has several CJK fonts does not draw Simplified glyph
shapes (the same code point can be shaped differently per region). Latin text keeps each library's own
default font; CJK glyphs fall back to the first family below that is installed.
"""
from __future__ import annotations

import shutil
import subprocess
import sys

TC_FAMILIES = ["Noto Sans CJK TC", "Noto Sans TC", "PingFang TC", "Microsoft JhengHei", "Source Han Sans TC",
               "Noto Sans CJK JP"]  # the last: same .ttc as TC on Debian; a better fallback than boxes
PLOTLY_DEFAULT = '"Open Sans", verdana, arial, sans-serif'
INSTALL_HINT = ("No Chinese font found, so Chinese labels in figures may draw as empty boxes. Install one: "
                "Debian/Ubuntu `apt-get install fonts-noto-cjk`, or download Noto Sans TC from "
                "fonts.google.com/noto/specimen/Noto+Sans+TC, then restart the kernel.\n"
                "找不到中文字型，圖中的中文可能顯示成空白方框。請安裝：Debian/Ubuntu 執行 "
                "`apt-get install fonts-noto-cjk`，或從 fonts.google.com/noto/specimen/Noto+Sans+TC 下載 "
                "Noto Sans TC，然後重新啟動核心。")
_warned = {"done": False}


def plotly_family(lang: str) -> str:
    """The CSS font stack plotly figures name for a language."""
    if lang == "zh-TW":
        return PLOTLY_DEFAULT.replace("sans-serif", ", ".join(f'"{f}"' for f in TC_FAMILIES) + ", sans-serif")
    return PLOTLY_DEFAULT


def system_fonts() -> dict[str, set[str]]:
    """Font files fontconfig knows that cover Traditional Chinese -> their family names (empty without fc-list)."""
    if not shutil.which("fc-list"):
        return {}
    out = subprocess.run(["fc-list", ":lang=zh-tw", "file", "family"], capture_output=True, text=True).stdout
    files: dict[str, set[str]] = {}
    for line in out.splitlines():
        path, _, fams = line.partition(": ")
        files.setdefault(path.strip(), set()).update(n.strip() for n in fams.split(","))
    return files


def installed_families() -> list[str]:
    """The TC_FAMILIES installed on this machine, as matplotlib sees them (fontconfig without matplotlib).

    Matplotlib caches its font list; a font installed after that cache was written is missing from it, so
    the files fontconfig lists for these families are added to matplotlib's list (milliseconds, in memory)."""
    try:
        from matplotlib import font_manager
    except ImportError:
        names = set().union(*system_fonts().values())
        return [f for f in TC_FAMILIES if f in names]
    names = {f.name for f in font_manager.fontManager.ttflist}
    if not any(f in names for f in TC_FAMILIES):
        for path, fams in system_fonts().items():
            if fams & set(TC_FAMILIES):
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):
                    continue
        names = {f.name for f in font_manager.fontManager.ttflist}
    return [f for f in TC_FAMILIES if f in names]


def apply(lang: str) -> None:
    """Give matplotlib (when it is installed) the CJK fallback; say once how to install a font if none."""
    if lang != "zh-TW":
        return
    found = installed_families()
    try:
        import matplotlib
    except ImportError:
        matplotlib = None
    if matplotlib is not None and found:
        # matplotlib falls back glyph by glyph only across the named families of font.family (a generic
        # "sans-serif" resolves to one font), so name them: the Latin default first, then the CJK ones
        latin = [f for f in matplotlib.rcParams["font.sans-serif"] if f not in found][:1]
        matplotlib.rcParams["font.family"] = latin + found
    if not found and not _warned["done"]:
        _warned["done"] = True
        print(INSTALL_HINT, file=sys.stderr)
