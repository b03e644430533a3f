"""The generated release workflow: pinned, least-privilege, strict, and clean under the real
linters (zizmor, and the GitHub workflow schema through check-jsonschema)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ortbundle._core.errors import ConfigError
from ortbundle.config.plan import load_plan
from ortbundle.config.products import load_product
from ortbundle.config.project import BuildOptions, Project
from ortbundle.tools.ci_workflow import load_action_pins, source_jobs, workflow_yaml

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "ci" / "darkroom-github-actions.yml"


def zizmor_findings(path: Path) -> list[dict[str, Any]]:
    """zizmor's findings, every persona (pedantic shows the most), offline."""
    exe = shutil.which("zizmor") or str(Path(sys.executable).with_name("zizmor"))
    found = subprocess.run(
        [exe, "--offline", "--persona", "pedantic", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert found.returncode in (0, 10, 11, 12, 13, 14), found.stderr  # 1x: findings, by severity
    findings: list[dict[str, Any]] = json.loads(found.stdout)
    return findings


def serious(findings: list[dict[str, Any]]) -> list[str]:
    return [
        f"{f['ident']} ({f['determinations']['severity']})"
        for f in findings
        if f["determinations"]["severity"] in ("High", "Medium")
    ]


def test_committed_workflow_is_the_generated_one() -> None:
    product = load_product(ROOT / "manifests" / "darkroom.toml")
    assert COMMITTED.read_text() == workflow_yaml(product), "regenerate with: invoke ci-workflow"


def test_committed_workflow_passes_zizmor() -> None:
    findings = zizmor_findings(COMMITTED)
    assert serious(findings) == []
    assert findings == []  # not even a low or informational one today


def test_zizmor_bites_on_the_old_workflow(tmp_path: Path) -> None:
    """The check is real: tag pins and the default (broad) token permissions are caught."""
    product = load_product(ROOT / "manifests" / "darkroom.toml")
    text = workflow_yaml(product)
    text = re.sub(r"@[0-9a-f]{40} # (v[0-9.]+)", r"@\1", text)  # tags instead of commits
    text = text.replace("permissions: {}\n", "").replace(
        "persist-credentials: false", "clean: true"
    )
    (tmp_path / "weak.yml").write_text(text)
    idents = {f.split(" ")[0] for f in serious(zizmor_findings(tmp_path / "weak.yml"))}
    assert {"unpinned-uses", "excessive-permissions"} <= idents


def test_committed_workflow_matches_the_github_workflow_schema(tmp_path: Path) -> None:
    def check(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "check_jsonschema",
                "--builtin-schema",
                "vendor.github-workflows",
                str(path),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    good = check(COMMITTED)
    assert good.returncode == 0, good.stdout + good.stderr
    broken = tmp_path / "broken.yml"  # the schema bites: a job with no runs-on or steps
    broken.write_text(COMMITTED.read_text().replace("runs-on: ubuntu-24.04", "runs_on: x", 1))
    assert check(broken).returncode != 0


def test_every_action_is_pinned_by_commit_with_its_version_in_a_comment() -> None:
    text = COMMITTED.read_text()
    pins = load_action_pins()
    uses = re.findall(r"uses: (\S+)@(\S+)(.*)", text)
    assert uses
    for name, ref, comment in uses:
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{name}@{ref} is not a commit"
        assert pins[name].commit == ref and comment == f" # {pins[name].version}"


def test_pins_that_are_not_commits_are_refused() -> None:
    with pytest.raises(ConfigError, match="not a full 40-hex commit SHA"):
        load_action_pins('[actions."actions/checkout"]\nversion = "v7.0.1"\ncommit = "v7.0.1"\n')
    with pytest.raises(ConfigError, match="not a full 40-hex commit SHA"):
        load_action_pins('[actions."actions/checkout"]\nversion = "v7"\ncommit = "3d3c42e5"\n')


def test_least_privilege_no_cache_and_a_strict_release() -> None:
    workflow = yaml.safe_load(COMMITTED.read_text())
    product = load_product(ROOT / "manifests" / "darkroom.toml")
    jobs = workflow["jobs"]
    assert workflow["permissions"] == {}
    assert set(jobs) == {f"build-{t}" for t in product.targets} | {"release", "publish"}
    for name, job in jobs.items():
        assert "permissions" in job, name
        writes = {k for k, v in job["permissions"].items() if v == "write"}
        assert writes == ({"contents", "id-token", "attestations"} if name == "publish" else set())
        for step in job["steps"]:
            uses = step.get("uses", "")
            assert "actions/cache" not in uses, name
            assert "cache" not in step.get("with", {}), name
            if uses.startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, name
    runs = [s.get("run", "") for s in jobs["release"]["steps"]]
    merge = next(s for s in runs if s.startswith("invoke release"))
    assert " --release " in merge and merge.count("--from") == len(product.targets)
    assert runs.index(merge) < next(i for i, s in enumerate(runs) if s.startswith("invoke verify"))
    publish = jobs["publish"]
    assert publish["needs"] == ["release"] and "refs/tags/" in publish["if"]
    uses = [s.get("uses", "") for s in publish["steps"]]
    assert any(u.startswith("actions/attest-build-provenance@") for u in uses)
    # only the publish job writes anywhere, and it runs only after the strict release passed
    assert all(
        "gh release" not in s.get("run", "")
        for j in jobs.values()
        if j is not publish
        for s in j["steps"]
    )


def test_each_build_job_vouches_for_its_runner_manifest_through_a_job_output() -> None:
    """The release job takes a runner's tree as evidence only with its manifest's SHA-256
    (#44): each build job outputs it, computed right after its build, and the release step
    receives every one of them through the environment (never interpolated into a shell)."""
    workflow = yaml.safe_load(COMMITTED.read_text())
    product = load_product(ROOT / "manifests" / "darkroom.toml")
    jobs = workflow["jobs"]
    for target in product.targets:
        job = jobs[f"build-{target}"]
        assert job["outputs"]["manifest"] == "${{ steps.manifest.outputs.sha256 }}", target
        runs = [s.get("run", "") for s in job["steps"]]
        digest = next(i for i, s in enumerate(job["steps"]) if s.get("id") == "manifest")
        built = next(i for i, s in enumerate(runs) if s.startswith("invoke build"))
        packed = next(i for i, s in enumerate(runs) if s.startswith("tar "))
        assert built < digest < packed, target
        assert "/manifest.json" in runs[digest] and "$GITHUB_OUTPUT" in runs[digest]
    merge = next(
        s for s in jobs["release"]["steps"] if s.get("run", "").startswith("invoke release")
    )
    given = re.findall(r"\$\{\{ (\S+) \}\}", merge["env"]["ORTBUNDLE_RUNNER_MANIFESTS"])
    assert given == [f"needs.build-{t}.outputs.manifest" for t in product.targets]
    assert "needs." not in merge["run"]


def test_the_windows_build_jobs_get_the_authenticode_identity_as_environment_secrets() -> None:
    """The installers are signed where they are built: those jobs (and only they, beside the
    release job) run in the protected environment and receive the identity as secrets."""
    jobs = yaml.safe_load(COMMITTED.read_text())["jobs"]
    product = load_product(ROOT / "manifests" / "darkroom.toml")
    windows = [t for t in product.targets if t.startswith("windows-")]
    assert windows
    for target in product.targets:
        job = jobs[f"build-{target}"]
        text = yaml.safe_dump(job)
        if target in windows:
            assert job["environment"] == "release", target
            assert "secrets.ORTBUNDLE_AUTHENTICODE_PFX_BASE64" in text
            build = next(s for s in job["steps"] if s.get("run", "").startswith("invoke build"))
            assert build["env"]["ORTBUNDLE_AUTHENTICODE_PASSWORD"] == (
                "${{ secrets.ORTBUNDLE_AUTHENTICODE_PASSWORD }}"
            )
            assert "osslsigncode" in text
        else:
            assert "AUTHENTICODE" not in text, target


def test_the_linux_build_jobs_get_the_openpgp_key_as_environment_secrets() -> None:
    """The .deb, the .rpm and the Arch source are signed where they are built (#46): the Linux
    jobs run in the protected environment, write the armoured key where only they see it and
    pass its passphrase; the jobs of other systems see neither."""
    jobs = yaml.safe_load(COMMITTED.read_text())["jobs"]
    product = load_product(ROOT / "manifests" / "darkroom.toml")
    linux = [t for t in product.targets if t.startswith("linux-")]
    assert linux and {"deb", "rpm", "arch"} <= set(product.channels)
    for target in product.targets:
        job = jobs[f"build-{target}"]
        text = yaml.safe_dump(job)
        if target in linux:
            assert job["environment"] == "release", target
            key = next(s for s in job["steps"] if "OPENPGP_KEY" in s.get("env", {}))
            assert key["env"]["OPENPGP_KEY"] == "${{ secrets.ORTBUNDLE_OPENPGP_KEY_ARMORED }}"
            assert "ORTBUNDLE_OPENPGP_KEY=" in key["run"] and "$GITHUB_ENV" in key["run"]
            build = next(s for s in job["steps"] if s.get("run", "").startswith("invoke build"))
            assert build["env"]["ORTBUNDLE_OPENPGP_PASSPHRASE"] == (
                "${{ secrets.ORTBUNDLE_OPENPGP_PASSPHRASE }}"
            )
        else:
            assert "OPENPGP" not in text, target
            assert ("environment" in job) == target.startswith("windows-"), target


def test_a_from_source_component_is_built_by_its_own_job_first(tmp_path: Path) -> None:
    """darkroom-rk3588: ort-rocket's archive is built from its pinned sources on an Arm runner
    (invoke build-source), and the linux-aarch64 job waits for it and takes it into place."""
    plan = load_plan(Project.at(ROOT), BuildOptions(product="darkroom-rk3588"))
    jobs = source_jobs(plan.product, plan.recipes)
    path = tmp_path / "rk3588.yml"
    path.write_text(workflow_yaml(plan.product, built=jobs))
    workflow = yaml.safe_load(path.read_text())
    job = workflow["jobs"]["source-ep-rocket-ep-linux-aarch64"]
    assert job["runs-on"] == "ubuntu-24.04-arm"
    runs = [step.get("run", "") for step in job["steps"]]
    assert 'invoke build-source --component "ep-rocket" --source "ep-linux-aarch64"' in runs
    assert any("gcc-aarch64-linux-gnu" in run for run in runs)
    uploaded = next(s for s in job["steps"] if "upload-artifact" in s.get("uses", ""))
    assert uploaded["with"]["path"] == "third_party/ort-rocket/ort-rocket-linux-aarch64.zip"
    target = workflow["jobs"]["build-linux-aarch64"]
    assert target["needs"] == ["source-ep-rocket-ep-linux-aarch64"]
    steps = [s.get("uses", "") + s.get("run", "") for s in target["steps"]]
    fetched = next(i for i, s in enumerate(steps) if "download-artifact" in s)
    assert fetched < next(i for i, s in enumerate(steps) if "invoke build " in s)
    assert target["steps"][fetched]["with"]["path"] == "third_party/ort-rocket"
    assert findings_of(path) == []


def findings_of(path: Path) -> list[str]:
    """zizmor's findings on a workflow, as ident (severity), every persona."""
    return [f"{f['ident']} ({f['determinations']['severity']})" for f in zizmor_findings(path)]
