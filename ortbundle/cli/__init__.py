"""The user-facing commands behind tasks.py, one module per command: argument shaping, output,
exit codes (common.py). The only layer that imports the pipeline's modules inside functions: a
no-op `invoke build` must not pay for HTTP, archives, binaries, the SBOM, licences or rich."""

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
