"""A number (or a word) the notebook's code computed, for the prose beside it: MyST-NB's glue, in small.

    from tinyserve.lang.glue import glue
    worst = glue("worst_total_pct", abs(row["error_pct"]), "{:.1f}")    # "9.7": returned, nothing printed

and the markdown says {glue}`worst_total_pct`. chapters/build.py runs the notebook's kernel with
$TINYSERVE_GLUE_FILE naming a JSON file, where every call records name -> text; after the run it fills each
{glue}`name` of both editions from what was recorded (the zh-TW edition runs its own kernel in zh-TW, so a word
from t() comes out in Chinese). In JupyterLab, without the variable, glue only formats.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

ENV = "TINYSERVE_GLUE_FILE"


def glue(name: str, value, fmt: str = "{}") -> str:
    """fmt.format(value), recorded under name in $TINYSERVE_GLUE_FILE when that is set; prints nothing."""
    text = fmt.format(value)
    path = os.environ.get(ENV)
    if path:
        values = recorded(Path(path))
        values[name] = text
        tmp = Path(f"{path}.tmp")  # written whole, then moved: a reader never sees half a file
        tmp.write_text(json.dumps(values, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    return text


def recorded(path: Path) -> dict[str, str]:
    """The values glued so far into a glue file ({} when it does not exist yet or is empty)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    return json.loads(text) if text.strip() else {}
