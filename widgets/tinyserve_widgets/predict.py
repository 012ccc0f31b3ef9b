"""Predict, then reveal: the learner answers before the cells that settle a question, then sees the engine's
answer beside theirs. A number goes in a box (Predict); a pick among options is offered as buttons (Choose).

    from tinyserve_widgets.predict import Predict
    p = Predict("How many tokens will slot 7 waste?", unit="tokens")
    p                                   # the question and a box (display it: last line of a cell)
    ...                                 # cells that run the engine
    with p.after_prediction():          # a cell that settles the question (`# %% [reveal]` in chapters/src)
        print(p.reveal(trace.metrics()["wasted_decode_tokens"]))   # both numbers side by side, in words
        say(...)                        # anything else the answer is made of: text, tables, figures
        prose(t("7.3.split.verdicts", ...))  # a paragraph that gives the answer away: markdown, hidden with the rest

Everything a reveal cell shows goes through `after_prediction()`. Run without a prediction (Run All, or a fresh
notebook), the block's outputs are not shown: the cell shows the hint (enter a prediction above, then run this
cell again) and, below it, the answer inside a closed `<details>` element that every run draws closed, so
nothing of it is on screen until the learner predicts (or deliberately opens it). nbval still compares the
whole output, hidden part included, so the engine's numbers stay checked. With a prediction, running the cell
again shows the outputs as they come, the prediction beside the answer.

A question lives as long as its kernel: running its cell again (or Run All) hands back the same question, the
prediction in it, so the reveal cells that follow show their answers at once. Entering a prediction also opens
the answers already drawn closed below (the question's widget opens every `.tinyserve-answer` that carries its
key, in the page: JupyterLab, Notebook 7, VS Code), the comparison in place of the hint; where a page cannot be
reached that way, running those cells again (or Run All) shows them. Nothing opens before a prediction.

Why a closed <details> and not a widget: an ipywidgets Output keeps its contents out of the notebook's stored
outputs, where nbval cannot check them; a folded output (metadata) opens again on every run.

Predict takes numbers only ("1,980", "2e3", "-4.5"; full-width digits and commas too: "１，９８０", "1，980");
Choose takes one of its options. Anything else is refused with the reason, inside the widget, and the reveal
does not happen. Once revealed, the question locks. Without a kernel (GitHub, nbviewer: widget state stripped)
the cell shows the question as text. Words: tinyserve's language table (catalog tinyserve/locale/widgets.pot),
"predict.*" keys.
"""
from __future__ import annotations

import base64
import hashlib
import math
import sys
import unicodedata
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from tinyserve.lang import t

ABSURD = 1e9  # no question here has an answer beyond this: a larger entry is a slip of the keyboard
_ASKED: dict[tuple, "_Question"] = {}  # this kernel's questions: a cell run again asks the same one, not a new one

# The view of the helper that opens a question's answers in the page (anywidget runs it; open_answers.js says how)
_OPEN_ESM = Path(__file__).with_name("open_answers.js")


@cache
def _opener():
    """The widget that opens a question's answers (anywidget: its view runs _OPEN_ESM); nothing of it is seen."""
    import anywidget
    import traitlets

    class Opener(anywidget.AnyWidget):
        _esm = _OPEN_ESM.read_text(encoding="utf-8")
        opened = traitlets.Dict().tag(sync=True)  # the question's key -> the comparison, once it is settled

    return Opener


def forget() -> None:
    """Forget every question asked (a kernel restart does it): the next one of the same words starts empty."""
    _ASKED.clear()


def question_key(question: str) -> str:
    """The key a question's closed answers carry: the same on every run, so the stored notebooks do not change."""
    return hashlib.sha1(question.encode("utf-8")).hexdigest()[:12]


def _fmt(x: float) -> str:
    """A number as a person writes it: thousands separators, no trailing .0, at most 4 significant decimals."""
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:,.4g}" if abs(x) < 1e6 else f"{x:.4g}"


def parse_number(text: str) -> float:
    """The number in text, or ValueError with the reason in words (commas/underscores as separators). Full-width
    digits, commas and points (a Chinese keyboard's "１，９８０", "１．５") read as their ASCII forms (NFKC)."""
    s = str(text).strip()
    if not s:
        raise ValueError(t("predict.empty"))
    cleaned = unicodedata.normalize("NFKC", s).replace("\u2212", "-")  # and the minus sign U+2212
    cleaned = cleaned.replace(",", "").replace("_", "").replace(" ", "")
    try:
        v = float(cleaned)
    except ValueError:
        raise ValueError(t("predict.not_number", text=s[:40])) from None
    if not math.isfinite(v) or cleaned.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        raise ValueError(t("predict.not_finite", text=s[:40]))
    return v


def compare(guess: float | None, answer: float, unit: str = "", tolerance: float = 0.1) -> str:
    """The sentence that puts a prediction beside the engine's answer (relative error; 'close' within tolerance).
    Without a prediction (guess None): the hint to enter one, never the answer."""
    u = f" {unit}" if unit else ""
    if guess is None:
        return t("predict.hint")
    if guess == answer:
        return t("predict.exact", guess=_fmt(guess), answer=_fmt(answer), unit=u)
    rel = abs(guess - answer) / abs(answer) if answer else math.inf
    off = t("predict.off_rel", rel=rel) if math.isfinite(rel) else t("predict.off_abs", diff=_fmt(abs(guess - answer)),
                                                                      unit=u)
    key = "predict.close" if rel <= tolerance else "predict.far"
    return t(key, guess=_fmt(guess), answer=_fmt(answer), unit=u, off=off,
             dir=t("predict.low") if guess < answer else t("predict.high"))


class _Question:
    """What a number question and a choice share: the question, a message line, the lock, and the answer held
    back until a prediction is in (after_prediction)."""

    guess = None
    answer = None
    held = None  # the answer a reveal cell met before the prediction: the comparison once it comes
    hint_key = "predict.hint"  # what to do before the answer shows: type a number (a choice: pick an option)

    def __new__(cls, question: str, *args, **kwargs):
        """The question asked before with the same words and settings, if this kernel has one (its cell run
        again: the prediction stays); else a new one."""
        key = (cls.__name__, question, repr(args), repr(sorted(kwargs.items())))
        same = _ASKED.get(key)
        if same is None:
            same = _ASKED[key] = super().__new__(cls)
            same._asked = False
        return same

    def _build(self, question: str, controls: list) -> None:
        import ipywidgets as w

        self.question, self.key = question, question_key(question)
        self.message = w.HTML()
        self.opener = _opener()(layout=w.Layout(display="none"))
        self.widget = w.VBox([w.HTML(f"<b>{_escape(question)}</b>"), w.HBox(controls), self.message, self.opener])
        self.widget.add_class("tinyserve-predict")  # the browser test finds the questions by it
        self._asked = True

    def _open_held(self) -> None:
        """A prediction came in after a reveal cell drew its answer closed: settle it now, and open the answers."""
        if self.held is not None and self.answer is None:
            sentence = self.reveal(*self.held)
            self.opener.opened = {self.key: sentence}

    def _refuse(self, reason: str) -> bool:
        self.message.value = f"<span style='color:#b00'>{_escape(reason)}</span>"
        return False

    def _pending(self) -> bool:
        """True when a prediction is in (Predict also takes a number typed but not yet sent)."""
        return self.answer is not None or self.guess is not None

    def _hint(self) -> str:
        hint = t(self.hint_key)
        if "color:#b00" not in self.message.value:  # a bad entry keeps its reason on screen
            self.message.value = _escape(hint)
        return hint

    @contextmanager
    def after_prediction(self):
        """The block's outputs as they come once a prediction is in; before that, the hint, and the outputs
        (text, displays, new matplotlib figures) inside a closed <details>."""
        if self._pending():
            yield self
            return
        from IPython.utils.capture import capture_output

        plt = sys.modules.get("matplotlib.pyplot")
        before = set(plt.get_fignums()) if plt else set()
        try:
            with capture_output(stdout=True, stderr=False, display=True) as cap:
                yield self
        except BaseException:
            sys.stdout.write(cap.stdout)  # a failing block: what it printed before the error, then the error
            raise
        plt = sys.modules.get("matplotlib.pyplot")  # the block may have imported it
        figures, meta = [], {}
        for n in [n for n in plt.get_fignums() if n not in before] if plt else []:
            png, md = _png(plt.figure(n))
            figures.append(png)
            meta.setdefault("image/png", {}).update(md)  # the words it draws, where the build records them
            plt.close(n)
        hint = self._hint()  # reveal() inside the block printed it too: once is enough
        text = "".join(ln for ln in cap.stdout.splitlines(keepends=True) if ln.rstrip("\n") != hint)
        _display_hidden(self.key, hint, text, [o.data for o in cap.outputs], figures, meta)

    def _repr_mimebundle_(self, **kwargs):
        """The widget where a kernel runs; the question as text where none does (GitHub, nbviewer)."""
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data["text/plain"] = t("predict.static", question=self.question)
        return bundle


class Predict(_Question):
    """A question, a box for a number and, after reveal(answer), both numbers side by side."""

    def __init__(self, question: str, unit: str = "", lo: float | None = None, hi: float | None = None,
                 tolerance: float = 0.1):
        import ipywidgets as w

        if self._asked:  # the same question, asked again: keep its prediction and its widget
            return
        self.unit, self.lo, self.hi, self.tolerance = unit, lo, hi, tolerance
        self.box = w.Text(placeholder=t("predict.placeholder"), continuous_update=False,
                          layout=w.Layout(width="12em"))
        self.button = w.Button(description=t("predict.lock"))
        self._build(question, [self.box, w.Label(unit), self.button])
        self.button.on_click(lambda _: self.submit(self.box.value))
        self.box.observe(lambda ch: self.submit(ch["new"]), names="value")

    def submit(self, text: str) -> bool:
        """Take text as the prediction; on bad input keep the previous one and say why in the widget."""
        if self.answer is not None:
            self.message.value = _escape(t("predict.revealed"))
            return False
        try:
            v = parse_number(text)
            if self.lo is not None and v < self.lo:
                raise ValueError(t("predict.below", guess=_fmt(v), lo=_fmt(self.lo)))
            if self.hi is not None and v > self.hi:
                raise ValueError(t("predict.above", guess=_fmt(v), hi=_fmt(self.hi)))
            if abs(v) > ABSURD:
                raise ValueError(t("predict.absurd", guess=_fmt(v), limit=_fmt(ABSURD)))
        except ValueError as e:
            return self._refuse(str(e))
        self.guess = v
        self.message.value = _escape(t("predict.locked", guess=_fmt(v) + (f" {self.unit}" if self.unit else "")))
        self._open_held()
        return True

    def _pending(self) -> bool:
        # a number typed but not yet sent (no Enter) counts as the prediction
        return super()._pending() or bool(str(self.box.value).strip() and self.submit(self.box.value))

    def reveal(self, answer: float) -> str:
        """Show the engine's answer beside the prediction, lock the box, and return the sentence. Without a
        valid prediction: the one-line hint instead (the answer is neither shown nor returned), the box stays
        open, and a bad entry's reason stays in the widget."""
        if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not math.isfinite(answer):
            raise ValueError(t("predict.bad_answer", answer=answer))
        if not self._pending():
            self.held = (answer,)
            return self._hint()
        self.answer = float(answer)
        self.box.disabled = self.button.disabled = True
        text = compare(self.guess, self.answer, self.unit, self.tolerance)
        self.message.value = _escape(text)
        return text


class Choose(_Question):
    """A question with options, offered as buttons; reveal(answer, why) says right or wrong, and why."""

    hint_key = "predict.hint_choice"

    def __init__(self, question: str, options: dict):
        import ipywidgets as w

        if self._asked:  # the same question, asked again: keep its pick and its widget
            return
        if len(options) < 2:
            raise ValueError(t("predict.few_options", n=len(options)))
        self.options = dict(options)  # value -> label the learner reads
        self.buttons = w.ToggleButtons(options=[(label, v) for v, label in self.options.items()], value=None,
                                       style={"button_width": "auto"})
        self._build(question, [self.buttons])
        self.buttons.observe(lambda ch: ch["new"] is not None and self.submit(ch["new"]), names="value")

    def submit(self, choice) -> bool:
        """Take one of the options (its value or its label) as the prediction; anything else is refused."""
        if self.answer is not None:
            self.message.value = _escape(t("predict.revealed"))
            return False
        by_label = {str(label): v for v, label in self.options.items()}
        if choice in self.options:
            value = choice
        elif str(choice).strip() in by_label:
            value = by_label[str(choice).strip()]
        else:
            return self._refuse(t("predict.not_offered", text=str(choice)[:40],
                                  options=" · ".join(map(str, self.options.values()))))
        self.guess = value
        self.message.value = _escape(t("predict.chose", choice=self.options[value]))
        self._open_held()
        return True

    def reveal(self, answer, why: str) -> str:
        """Say whether the pick was right, name the engine's answer, and give the reason (why); lock the buttons.
        Without a pick: the one-line hint instead (the answer is neither shown nor returned)."""
        if answer not in self.options:
            raise ValueError(t("predict.bad_option", answer=answer))
        if not self._pending():
            self.held = (answer, why)
            return self._hint()
        self.answer = answer
        self.buttons.disabled = True
        key = "predict.right" if self.guess == answer else "predict.wrong"
        text = t(key, choice=self.options[self.guess], answer=self.options[answer], why=why)
        self.message.value = _escape(text)
        return text

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data["text/plain"] = t("predict.static", question=f"{self.question} ({' · '.join(map(str, self.options.values()))})")
        return bundle


def _png(fig) -> tuple[str, dict]:
    """A figure as the notebook would draw it (base64 PNG) and its output metadata, through IPython's own
    formatter where a kernel runs (tinyserve.lang.drawn notes the words it draws there)."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None and hasattr(shell, "display_formatter"):
        data, md = shell.display_formatter.format(fig, include=("image/png", "text/plain"))
        if "image/png" in data:
            png = data["image/png"]
            png = base64.b64encode(png).decode() if isinstance(png, bytes) else png
            return png, md.get("image/png", {})
    from IPython.core.pylabtools import print_figure

    return print_figure(fig, "png", bbox_inches="tight", base64=True), {}


def _display_hidden(key: str, hint: str, text: str, displays: list[dict], pngs: list[str], metadata: dict) -> None:
    """One output: the hint on screen, the answer (printed text, displays, figures) in a closed <details>; it
    carries the question's key, by which the question's widget opens it once the prediction is in."""
    from IPython.display import display

    parts = [f"<pre>{_escape(text.rstrip())}</pre>"] if text.strip() else []
    plain = [text.rstrip()] if text.strip() else []
    for data in displays:
        if "text/markdown" in data:  # prose(): the page's own markdown, rendered as JupyterLab would
            import mistune

            parts.append(mistune.html(data["text/markdown"]))
        elif "text/html" in data:
            parts.append(data["text/html"])
        elif "image/png" in data:
            parts.append(_img(data["image/png"]))
        else:
            parts.append(f"<pre>{_escape(data.get('text/plain', ''))}</pre>")
        plain.append(data.get("text/plain", ""))
    parts += [_img(png) for png in pngs]
    summary = t("predict.summary")
    head = f"<div class='tinyserve-answer' data-question='{key}'><p class='tinyserve-hint'>"  # words: ok (markup)
    html = (head + f"{_escape(hint)}</p><details><summary>{_escape(summary)}</summary>"
            + "".join(parts) + "</details></div>")
    display({"text/html": html, "text/plain": "\n".join([hint, summary + ":", *plain])}, metadata=metadata, raw=True)


def prose(text: str) -> None:
    """Show a paragraph of markdown; inside after_prediction() it is hidden with the answer it gives away (a
    markdown cell after a reveal would be on screen before the learner predicts)."""
    from IPython.display import display

    display({"text/markdown": text, "text/plain": text}, raw=True)


def _img(png: str) -> str:
    return "<img src='data:image/png;base64," + png + "'>"  # words: ok (markup)


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
