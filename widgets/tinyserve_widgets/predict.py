"""Predict, then reveal: the learner types a number before the cell that settles it, then sees the engine's
answer beside theirs.

    from tinyserve_widgets.predict import Predict
    p = Predict("How many tokens will slot 7 waste?", unit="tokens")
    p                                   # the question and a box (display it: last line of a cell)
    ...                                 # cells that run the engine
    print(p.reveal(trace.metrics()["wasted_decode_tokens"]))   # both numbers side by side, in words

Run before a prediction was entered (a notebook opened as shipped, or run top to bottom), reveal() never shows
the answer: it returns a one-line hint (enter a prediction above, then run this cell again) and leaves the box
open; after a prediction, running the same cell again shows both numbers.

Only numbers are accepted ("1,980", "2e3", "-4.5"; full-width digits and commas too: "１，９８０", "1，980");
anything else is refused with the reason, inside the widget. Once revealed, the box locks. Without a kernel (GitHub, nbviewer: widget state stripped) the cell
shows the question as text, and reveal() returns a plain sentence a checked cell can print.
Words live in tinyserve's language table (catalog tinyserve/locale/widgets.pot), under "predict.*" keys.
"""
from __future__ import annotations

import math
import unicodedata

from .words import t



ABSURD = 1e9  # no question here has an answer beyond this: a larger entry is a slip of the keyboard


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


class Predict:
    """A question, a box for a number and, after reveal(answer), both numbers side by side."""

    def __init__(self, question: str, unit: str = "", lo: float | None = None, hi: float | None = None,
                 tolerance: float = 0.1):
        import ipywidgets as w

        self.question, self.unit, self.lo, self.hi, self.tolerance = question, unit, lo, hi, tolerance
        self.guess: float | None = None
        self.answer: float | None = None
        self.box = w.Text(placeholder=t("predict.placeholder"), continuous_update=False,
                          layout=w.Layout(width="12em"))
        self.button = w.Button(description=t("predict.lock"))
        self.message = w.HTML()
        self.widget = w.VBox([w.HTML(f"<b>{_escape(question)}</b>"),
                              w.HBox([self.box, w.Label(unit), self.button]), self.message])
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
            self.message.value = f"<span style='color:#b00'>{_escape(str(e))}</span>"
            return False
        self.guess = v
        self.message.value = _escape(t("predict.locked", guess=_fmt(v) + (f" {self.unit}" if self.unit else "")))
        return True

    def reveal(self, answer: float) -> str:
        """Show the engine's answer beside the prediction, lock the box, and return the sentence. Without a
        valid prediction: the one-line hint instead (the answer is neither shown nor returned), the box stays
        open, and a bad entry's reason stays in the widget."""
        if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not math.isfinite(answer):
            raise ValueError(t("predict.bad_answer", answer=answer))
        # a number typed but not yet sent (no Enter) counts as the prediction
        if self.answer is None and self.guess is None and not (str(self.box.value).strip()
                                                               and self.submit(self.box.value)):
            hint = t("predict.hint")
            if "color:#b00" not in self.message.value:  # a bad entry keeps its reason on screen
                self.message.value = _escape(hint)
            return hint
        self.answer = float(answer)
        self.box.disabled = self.button.disabled = True
        text = compare(self.guess, self.answer, self.unit, self.tolerance)
        self.message.value = _escape(text)
        return text

    def _repr_mimebundle_(self, **kwargs):
        """The widget where a kernel runs; the question as text where none does (GitHub, nbviewer)."""
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data["text/plain"] = t("predict.static", question=self.question)
        return bundle


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
