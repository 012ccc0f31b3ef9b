"""The record of a run (Trace: steps and requests), its arrays and metrics, and its exports."""
from .record import *  # noqa: F401,F403  the old module tinyserve.trace, whose names stay importable from here
