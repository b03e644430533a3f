"""The smoke checks' use of the probe (checks.py); the probe itself, its build and its line
protocol are ortbundle/stage/probe, where the stage runs it to read a core's providers."""
