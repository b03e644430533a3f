"""invoke smoke: install each built package with its own tool and run every runtime it ships."""
