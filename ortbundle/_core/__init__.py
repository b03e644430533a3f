"""What every step stands on: typed errors, atomic file writes, the cache and data locations,
progress output, templates, the one-step publish and the fault points tests set."""
