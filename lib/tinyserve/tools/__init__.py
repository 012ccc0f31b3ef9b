"""The commands and tools around the engine: cli, bench, replay, hf export, train, calibrate, validate."""
