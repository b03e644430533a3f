"""ortbundle: pruned ONNX Runtime bundles and their packaging, from pinned upstream artifacts.

The public surface is what `__all__` names: build, release and verify with their options,
results and errors. Everything else is private by convention and may change between versions.
The names are resolved on first use, so `import ortbundle` stays as cheap as the no-op build
that starts with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ortbundle._core.errors import (
        ArchiveError,
        AuditError,
        BinaryError,
        ClosureError,
        ConfigError,
        DiskError,
        FetchError,
        IntegrityError,
        LicenseError,
        OfflineError,
        OrtbundleError,
        PackagingError,
        SmokeError,
    )
    from ortbundle._core.version import __version__
    from ortbundle.config.project import BuildOptions, Project
    from ortbundle.evidence.verify import verify_tree
    from ortbundle.pipeline.build import AuditFailed, build
    from ortbundle.pipeline.release import ReleaseResult, release
    from ortbundle.pipeline.result import BuildResult

__all__ = [
    "ArchiveError",
    "AuditError",
    "AuditFailed",
    "BinaryError",
    "BuildOptions",
    "BuildResult",
    "ClosureError",
    "ConfigError",
    "DiskError",
    "FetchError",
    "IntegrityError",
    "LicenseError",
    "OfflineError",
    "OrtbundleError",
    "PackagingError",
    "Project",
    "ReleaseResult",
    "SmokeError",
    "__version__",
    "build",
    "release",
    "verify_tree",
]

_ERRORS = (
    "ArchiveError",
    "AuditError",
    "BinaryError",
    "ClosureError",
    "ConfigError",
    "DiskError",
    "FetchError",
    "IntegrityError",
    "LicenseError",
    "OfflineError",
    "OrtbundleError",
    "PackagingError",
    "SmokeError",
)

# where each lazily resolved name lives: nothing is imported with the package, whose first
# import (`ortbundle._core.locations`, by tasks.py) comes before the bytecode cache is set up
_LAZY = {
    **dict.fromkeys(_ERRORS, "ortbundle._core.errors"),
    "__version__": "ortbundle._core.version",
    "BuildOptions": "ortbundle.config.project",
    "Project": "ortbundle.config.project",
    "AuditFailed": "ortbundle.pipeline.build",
    "BuildResult": "ortbundle.pipeline.build",
    "build": "ortbundle.pipeline.build",
    "ReleaseResult": "ortbundle.pipeline.release",
    "release": "ortbundle.pipeline.release",
    "verify_tree": "ortbundle.evidence.verify",
}


def __getattr__(name: str) -> Any:
    """Each public name, imported when first asked for (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ortbundle' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
