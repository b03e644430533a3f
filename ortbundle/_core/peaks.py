"""The build's peak memory so far, for its summary (pipeline/result.py and the replay's)."""

from __future__ import annotations

import sys


def memory_peaks() -> dict[str, float]:
    """This process's peak resident set, and a bound on the largest of the tools it ran (a
    child's ru_maxrss includes the parent's resident set it shared until exec), in MiB. Linux
    and macOS report ru_maxrss in KiB and bytes; Windows has no resource module."""
    try:
        import resource
    except ImportError:  # Windows
        return {"ortbundle_peak_mib": 0.0, "tools_peak_mib": 0.0}
    unit = 1 if sys.platform == "darwin" else 1024

    def peak(who: int) -> float:
        return round(resource.getrusage(who).ru_maxrss * unit / (1 << 20), 1)

    return {
        "ortbundle_peak_mib": peak(resource.RUSAGE_SELF),
        "tools_peak_mib": peak(resource.RUSAGE_CHILDREN),
    }
