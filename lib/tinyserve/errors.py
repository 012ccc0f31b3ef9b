"""The one error type users see: a clear message naming the argument and its allowed range."""


class TinyserveError(ValueError):
    """Bad input or an unusable resource; the CLI prints it as one line and exits 2."""
