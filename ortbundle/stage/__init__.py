"""Turning fetched archives into pruned runtime trees: binary analysis, the dependency closure,
staging, models, versions, the oldest system and runtimes.json."""
