"""What the lessons compute from traces and presets, once: notebooks and widgets import it, never re-derive it."""
