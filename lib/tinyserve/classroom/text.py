"""The classroom's words, read from the one language table (tinyserve.lang; catalog locale/classroom.pot, .po).

`say(key, **fields)` is the "classroom.<key>" entry in the current language (tinyserve.set_language), filled
with str.format. Keys are grouped there by who speaks: the checkers (a check cell's message), the self-check and
the grader (their reports and CSV reasons).
"""
from __future__ import annotations

from ..lang import t, table


def say(key: str, **fields) -> str:
    """The text for key, filled in, in the current language (a field may be named `lang`: filled here, not by t)."""
    return t(f"classroom.{key}").format(**fields)


def exercise_name(label: str) -> str:
    """An exercise's name as a learner reads it ("7.1 (a) padding tokens" in the current language); a label the
    table does not know (an instructor's own) as it is."""
    key = f"classroom.label.{label}"
    return t(key) if key in table() else label
