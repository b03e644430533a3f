"""The CI workflow template: one job per target of a product, a strict release job, a publisher.

GitHub Actions syntax, generated from the product manifest so the job list cannot drift from
the targets, with every action pinned by commit (ortbundle/data/actions.toml). Any other CI runs
the same commands: `invoke build --target T` per runner, carry each dist/ as a tar archive, then
`invoke release --release --from …` and `invoke verify`.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

from ortbundle._core.errors import ConfigError
from ortbundle._core.templating import render
from ortbundle.channels.openpgp import signed_channels
from ortbundle.config.products import Product
from ortbundle.config.recipes import Recipe
from ortbundle.config.schema import check_document
from ortbundle.config.sources import LocalCoordinates
from ortbundle.config.targets import get_target
from ortbundle.config.vocabulary import CHANNEL_TARGETS
from ortbundle.evidence.names import (
    AUDIT_NAME,
    MANIFEST_NAME,
    PROVENANCE_NAME,
    REPORT_NAME,
    SBOM_NAME,
    SIGNATURE_NAME,
)

# Debian packages a runner needs to build (not test) a target's packages: makensis, and
# osslsigncode, which signs the installers when the Authenticode identity is configured.
BUILD_PACKAGES = {
    "windows-x86_64": ("nsis", "osslsigncode"),
    "windows-arm64": ("nsis", "osslsigncode"),
}
# the targets whose build job signs what it builds (the installers), so it holds the identity
SIGNED_TARGETS = ("windows-x86_64", "windows-arm64")
# The evidence the publish job attaches to the GitHub release (and attests), beside release.tar.
# attached to the GitHub release beside release.tar: what an auditor reads without unpacking it
EVIDENCE = (MANIFEST_NAME, SIGNATURE_NAME, PROVENANCE_NAME, SBOM_NAME, AUDIT_NAME, REPORT_NAME)
ACTIONS_FILE = "data/actions.toml"
_JOB_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_ACTION = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+$")


@dataclass(frozen=True)
class ActionPin:
    """One action at one commit; the version is what a person reads, the commit what runs."""

    name: str  # owner/repo[/path]
    version: str  # the release tag the commit was read from
    commit: str  # full 40-hex commit SHA

    @property
    def uses(self) -> str:
        return f"{self.name}@{self.commit} # {self.version}"


def load_action_pins(text: str | None = None) -> dict[str, ActionPin]:
    """The pins in ortbundle/data/actions.toml; anything but a full commit SHA is an error."""
    where = f"ortbundle/{ACTIONS_FILE}"
    if text is None:
        text = resources.files("ortbundle").joinpath(ACTIONS_FILE).read_text("utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=where) from None
    check_document(where, data, "actions-data")
    table = data.get("actions", {})
    pins: dict[str, ActionPin] = {}
    for name, entry in table.items():
        version = entry.get("version") if isinstance(entry, dict) else None
        commit = entry.get("commit") if isinstance(entry, dict) else None
        if not _ACTION.match(name) or not isinstance(version, str) or not version:
            raise ConfigError(
                f"actions.{name!r} needs an owner/repo name and a version", file=where
            )
        if not isinstance(commit, str) or not _COMMIT.match(commit):
            raise ConfigError(
                f"actions.{name!r}: commit {commit!r} is not a full 40-hex commit SHA",
                file=where,
                fix=f"read it with: git ls-remote --tags https://github.com/{name} {version}",
            )
        pins[name] = ActionPin(name, version, commit)
    return pins


def _quoted(value: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(value)


def _job_id(value: str) -> str:
    if not _JOB_ID.match(value):
        raise ValueError(f"{value!r} cannot be a workflow job id")
    return value


# The runner a from-source build job runs on, by the target's machine: GitHub's hosted Linux
# runners for x86-64 and for Arm (what the binary is built for is what it is built on).
SOURCE_RUNNERS = {"EM_X86_64": "ubuntu-24.04", "EM_AARCH64": "ubuntu-24.04-arm"}


@dataclass(frozen=True)
class SourceJob:
    """A job that builds a from-source component's archive from its pinned sources (`invoke
    build-source`) before the target jobs that ship it: the archive travels to them as an
    artifact, into its place in the checkout (a project file the recipe pins by `path`)."""

    component: str
    source: str
    runner: str
    packages: tuple[str, ...]
    path: str  # the pinned file's path in the project; "" for a URL (the job checks it only)
    targets: tuple[str, ...]  # the product's targets whose runtimes take it

    @property
    def id(self) -> str:
        return f"source-{self.component}-{self.source}"

    @property
    def directory(self) -> str:
        return self.path.rpartition("/")[0] or "."


def source_jobs(product: Product, recipes: Mapping[str, Recipe]) -> list[SourceJob]:
    """One job per source of the product's recipes built from source, for the targets that
    take it."""
    jobs = []
    for name, recipe in sorted(recipes.items()):
        for sid, source in sorted(recipe.sources.items()):
            if source.build is None:
                continue
            targets = tuple(
                t
                for t in product.targets
                if t in recipe.targets and any(k.source == sid for k in recipe.for_target(t).takes)
            )
            if not targets:
                continue
            machine = get_target(targets[0]).machine
            origin = source.origin
            jobs.append(
                SourceJob(
                    component=name,
                    source=sid,
                    runner=SOURCE_RUNNERS.get(machine, "ubuntu-24.04"),
                    packages=source.build.packages,
                    path=origin.path if isinstance(origin, LocalCoordinates) else "",
                    targets=targets,
                )
            )
    return jobs


def workflow_yaml(
    product: Product,
    pins: dict[str, ActionPin] | None = None,
    built: Sequence[SourceJob] = (),
) -> str:
    """The workflow; `built`: its from-source jobs (source_jobs), which the target jobs that
    ship their archives wait for."""
    pins = load_action_pins() if pins is None else pins

    def action(name: str) -> str:
        if name not in pins:
            raise ConfigError(
                f"the workflow uses {name}, which has no pin",
                file=f"ortbundle/{ACTIONS_FILE}",
                fix=f'add [actions."{name}"] with its version and commit',
            )
        return pins[name].uses

    return render(
        "github-workflow.yml.j2",
        {
            "product": product.name,
            "targets": list(product.targets),
            "apt_packages": {t: list(BUILD_PACKAGES.get(t, ())) for t in product.targets},
            "signed_targets": [t for t in product.targets if t in SIGNED_TARGETS],
            # Linux targets whose packages the OpenPGP key signs (channels/openpgp.py)
            "openpgp_targets": [
                t
                for t in product.targets
                if get_target(t).os == "linux"
                and any(t in CHANNEL_TARGETS[c] for c in signed_channels(product.channels))
            ],
            "evidence": list(EVIDENCE),
            "source_jobs": list(built),
            "needs_sources": {t: [j for j in built if t in j.targets] for t in product.targets},
        },
        {"q": _quoted, "id": _job_id, "action": action},
    )
