"""The user-facing commands behind tasks.py, one module per command: argument shaping, output,
exit codes (common.py). The only layer that imports the pipeline's modules inside functions: a
no-op `invoke build` must not pay for HTTP, archives, binaries, the SBOM, licences or rich."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ortbundle.cli.build import run_audit, run_build, run_clean, run_fetch
    from ortbundle.cli.cache import run_cache_transfer, run_cache_verify
    from ortbundle.cli.ci import run_ci_workflow
    from ortbundle.cli.common import ROOT, USAGE_EXIT, CommandFailed
    from ortbundle.cli.keygen import run_keygen
    from ortbundle.cli.pin import run_pin
    from ortbundle.cli.release import run_release
    from ortbundle.cli.scaffold import run_new_recipe
    from ortbundle.cli.smoke import run_smoke
    from ortbundle.cli.verify import run_verify

__all__ = [
    "ROOT",
    "USAGE_EXIT",
    "CommandFailed",
    "run_audit",
    "run_build",
    "run_cache_transfer",
    "run_cache_verify",
    "run_ci_workflow",
    "run_clean",
    "run_fetch",
    "run_keygen",
    "run_new_recipe",
    "run_pin",
    "run_release",
    "run_smoke",
    "run_verify",
]

# where each name lives: a command's module is imported when it is first asked for (PEP 562),
# so `invoke build` loads no other command's module
_LAZY = {
    "ROOT": "common",
    "USAGE_EXIT": "common",
    "CommandFailed": "common",
    "run_audit": "build",
    "run_build": "build",
    "run_clean": "build",
    "run_fetch": "build",
    "run_cache_transfer": "cache",
    "run_cache_verify": "cache",
    "run_ci_workflow": "ci",
    "run_keygen": "keygen",
    "run_new_recipe": "scaffold",
    "run_pin": "pin",
    "run_release": "release",
    "run_smoke": "smoke",
    "run_verify": "verify",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ortbundle.cli' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ortbundle.cli.{module}"), name)
