"""The CI workflow template: one job per target of a product, then a release job that merges.

GitHub Actions syntax, generated from the product manifest so the job list cannot drift from
the targets. Any other CI runs the same commands: `invoke build --target T` per runner, carry
each dist/ as a tar archive, then `invoke release --from …` and `invoke verify`.
"""

from __future__ import annotations

import json
import re

from ortbundle.recipes import Product
from ortbundle.templating import render

# Debian packages a runner needs to build (not test) a target's packages.
BUILD_PACKAGES = {"windows-x86_64": ("nsis",)}
_JOB_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _quoted(value: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(value)


def _job_id(value: str) -> str:
    if not _JOB_ID.match(value):
        raise ValueError(f"{value!r} cannot be a workflow job id")
    return value


def workflow_yaml(product: Product) -> str:
    return render(
        "github-workflow.yml.j2",
        {
            "product": product.name,
            "targets": list(product.targets),
            "apt_packages": {t: list(BUILD_PACKAGES.get(t, ())) for t in product.targets},
        },
        {"q": _quoted, "id": _job_id},
    )
