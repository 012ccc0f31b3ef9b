"""The record of a run, each name in the module that defines it: record.py (Trace: steps and requests), step.py
(StepRecord), arrays.py (its views as arrays, the phase and state codes: DECODE, GRID_PHASES, REQUEST_STATES, ...),
metrics.py, latency.py, slo.py, export.py, report.py. This package re-exports nothing."""
