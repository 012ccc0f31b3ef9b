"""A number (or a word) the notebook's code computed, for the prose beside it: MyST-NB's glue, in small.

    from tinyserve.lang.glue import glue
    glue("worst_total_pct", abs(row["error_pct"]), "{:.1f}")    # records "9.7"; shows and returns nothing
    glue("cpu_ratio", ratio, "{:.1f}", measured=True)           # a wall-clock measurement: never in prose

and the markdown says {glue}`worst_total_pct`. chapters/build.py runs the notebook's kernel with
$TINYSERVE_GLUE_FILE naming a JSON file, where every call records name -> {"text", "measured"}; after the run it
fills each {glue}`name` of both editions from what was recorded (the zh-TW edition runs its own kernel in zh-TW,
so a word from t() comes out in Chinese) and keeps the record in the notebook's metadata, where a test compares
the two editions' numbers. A value marked measured (wall clock: it differs between builds and machines) is
refused in prose: the prose points at the reader's own output instead, so both editions say the same. In
JupyterLab, without the variable, glue does nothing. It returns None, so a glue call on a cell's last line
shows nothing.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

ENV = "TINYSERVE_GLUE_FILE"


def glue(name: str, value, fmt: str = "{}", *, measured: bool = False) -> None:
    """Record fmt.format(value) under name in $TINYSERVE_GLUE_FILE when that is set (measured: a wall-clock
    value, which the build keeps out of prose); prints and returns nothing."""
    text = fmt.format(value)
    path = os.environ.get(ENV)
    if path:
        values = recorded(Path(path))
        values[name] = {"text": text, "measured": bool(measured)}
        tmp = Path(f"{path}.tmp")  # written whole, then moved: a reader never sees half a file
        tmp.write_text(json.dumps(values, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(tmp, path)


def recorded(path: Path) -> dict[str, dict]:
    """The values glued so far into a glue file, name -> {"text", "measured"} ({} when it does not exist yet or
    is empty)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    return json.loads(text) if text.strip() else {}
