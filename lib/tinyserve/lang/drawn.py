"""The words a notebook's figures and widgets show, recorded beside each displayed output when the build asks.

A PNG is pixels, and a widget's state is stripped from the stored notebooks, so a test that reads the stored
notebooks cannot see what a figure draws or what a widget's buttons say. chapters/build.py runs each kernel with
$TINYSERVE_RECORD_TEXT set; tinyserve.set_language() (the setup line every notebook runs) then calls install(),
which, in an IPython kernel only:

* wraps matplotlib's Text.draw, so every string a figure actually draws (titles, axis labels, tick labels as
  formatted, legend entries, annotations, colorbar labels; nothing that is set but not drawn) is noted while
  IPython formats an output, and
* wraps IPython's display formatter, so each displayed output carries what it shows in its metadata:
  metadata["image/png"]["tinyserve/text"] (the drawn strings, in drawing order, each once) and
  metadata["application/vnd.jupyter.widget-view+json"]["tinyserve/text"] (the widget tree's descriptions,
  options, tooltips, placeholders, HTML and label values, and its plotly figures' words: widget_words()).

tests/chapters/test_zh_edition.py reads them. Without the variable nothing is installed (a learner's kernel,
nbval). No pyplot state is touched.
"""
from __future__ import annotations

import functools
import os
import re

ENV = "TINYSERVE_RECORD_TEXT"
KEY = "tinyserve/text"
PNG, WIDGET = "image/png", "application/vnd.jupyter.widget-view+json"
_state: dict = {"installed": False, "sink": None}


def install() -> bool:
    """Record drawn and shown words into displayed outputs' metadata, once per kernel, when $ENV is set and an
    IPython kernel runs; returns whether recording is on."""
    if _state["installed"]:
        return True
    if not os.environ.get(ENV):
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return False
    import matplotlib.text

    draw = matplotlib.text.Text.draw

    @functools.wraps(draw)  # keeps allow_rasterization's mark
    def noting_draw(self, renderer, *args, **kwargs):
        sink = _state["sink"]
        if sink is not None and self.get_visible() and self.get_text():
            sink.append(self.get_text())
        return draw(self, renderer, *args, **kwargs)

    matplotlib.text.Text.draw = noting_draw
    formatter = shell.display_formatter
    fmt = formatter.format

    def noting_format(obj, include=None, exclude=None):
        outer, sink = _state["sink"], []
        _state["sink"] = sink
        try:
            data, md = fmt(obj, include=include, exclude=exclude)
        finally:
            _state["sink"] = outer
        if outer is not None:
            outer.extend(sink)
        if isinstance(data, dict) and isinstance(md, dict):
            if PNG in data:
                md.setdefault(PNG, {})[KEY] = list(dict.fromkeys(sink))
            if WIDGET in data:
                md.setdefault(WIDGET, {})[KEY] = widget_words(obj)
        return data, md

    formatter.format = noting_format
    _state["installed"] = True
    return True


# ------------------------------------------------------------------------------------------- the words
FIGURE_KEYS = {"text", "name", "hovertemplate", "texttemplate", "ticktext", "label", "title"}


def figure_words(spec) -> list[str]:
    """The words of a plotly figure (its JSON): titles, axis titles, tick text, legend names, annotations, hover
    and text templates, buttons' and sliders' labels (template fields such as %{x} and HTML tags dropped)."""
    out: list[str] = []

    def walk(node, key=None):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "template":  # plotly's theme: no learner-facing words
                    continue
                walk(v, k)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key in FIGURE_KEYS:
            out.append(node)

    walk(spec)
    return list(dict.fromkeys(s for s in out if s.strip()))


def _plain(html: str) -> str:
    return re.sub(r"<[^>]*>", " ", html)


def widget_words(obj) -> list[str]:
    """Every string an ipywidgets tree shows: descriptions, options' labels, tooltips, placeholders, the values of
    HTML, Label and button widgets, and the words of the plotly figures in it (obj: a widget or an object holding
    one as .widget, such as tinyserve_widgets' Explorer)."""
    out: list[str] = []
    seen: set[int] = set()
    stack = [obj]
    while stack:
        w = stack.pop(0)
        if w is None or id(w) in seen:
            continue
        seen.add(id(w))
        if hasattr(w, "widget") and not hasattr(w, "_model_id"):
            stack.append(w.widget)
            continue
        if hasattr(w, "to_plotly_json") and hasattr(w, "layout"):
            try:
                out.extend(figure_words(w.to_plotly_json()))
            except Exception:  # noqa: BLE001  (a figure that cannot serialise: nothing to read)
                pass
            continue
        name = type(w).__name__
        for attr in ("description", "tooltip", "placeholder"):
            v = getattr(w, attr, None)
            if isinstance(v, str) and v.strip():
                out.append(_plain(v) if getattr(w, "description_allow_html", False) else v)
        for attr in ("_options_labels", "tooltips"):
            v = getattr(w, attr, None)
            if isinstance(v, (list, tuple)):
                out.extend(str(x) for x in v if str(x).strip())
        if name in ("HTML", "HTMLMath", "Label", "Valid"):
            v = getattr(w, "value", None)
            if isinstance(v, str) and v.strip():
                out.append(_plain(v))
        children = getattr(w, "children", None)
        if isinstance(children, (list, tuple)):
            stack.extend(children)
    out = [s.replace("\u200b", "").strip() for s in out]  # ipywidgets' default placeholder is a zero-width space
    return list(dict.fromkeys(s for s in out if s))
