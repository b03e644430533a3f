"""The conformance corpus (issue #42): every pinned package of the ONNX Runtime family, scaffolded
and built as a user would, held against the truth tables read with independent tools.

For each package and target of tests/data/corpus/pins.toml a fresh project gets
`new-recipe -s pypi:NAME==VERSION --product acme -t TARGET` (after the stock `onnxruntime` pin
of the version pins.toml names as `core`, for a package that ships no core), then a build with
the audit only. What ortbundle found — kind, entry, provider / EP names, embedded components,
required and optional system libraries, oldest OS — is compared with the truth table, and each
package and target gets a verdict: "match", or every difference as `field: truth … vs ortbundle …`.

The verdicts are the generated page docs/corpus-verdicts.md; the test fails when what it
computes differs from the committed page, so an improvement and a regression alike wait for a
person to regenerate and review it:

    ORTBUNDLE_CORPUS_WRITE=1 python3 -m pytest -p no:cacheprovider tests/test_corpus.py

Independently, no message of the run may carry a traceback or a temporary path. Downloads go
through ortbundle's own cache (ORTBUNDLE_CACHE_DIR, else the default), so a second run downloads
nothing; but the scaffold reads the index's page of each release even when its wheel is cached,
so without the index the corpus skips, naming what it could not fetch.
ORTBUNDLE_CORPUS=pkg[,pkg…] restricts a run to those packages (their verdicts only are
compared); CI runs the whole corpus (47 s warm, about 4 min with an empty cache)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
import tomllib
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from ortbundle._core.errors import FetchError, OfflineError, OrtbundleError
from ortbundle._core.locations import default_cache_dir
from ortbundle._core.progress import plain_reporter
from ortbundle.cli.common import CommandFailed, headline
from ortbundle.cli.scaffold import run_new_recipe
from ortbundle.config.plan import BuildOptions, Project
from ortbundle.pipeline.build import AuditFailed, build
from ortbundle.pipeline.result import BuildResult
from ortbundle.tools.scaffold import ScaffoldOptions
from tests.helpers.project import REPO_POLICY
from tests.helpers.real import ROOT

# an empty cache downloads about 770 MB of wheels (4 min here): more than the suite's 900 s
# per test would allow on a slow link
pytestmark = [pytest.mark.real, pytest.mark.corpus, pytest.mark.timeout(2400)]

CORPUS = ROOT / "tests/data/corpus"
PAGE = ROOT / "docs/corpus-verdicts.md"
PRODUCT = "acme"
ENV_SUBSET, ENV_WRITE = "ORTBUNDLE_CORPUS", "ORTBUNDLE_CORPUS_WRITE"
TRACEBACK = "Traceback (most recent call last)"
CPYTHON = re.compile(r"\.cpython-3\d+")
# the one channel the build that follows a refused audit packages, of those the scaffold's
# product has for each system
QUICK_CHANNEL = {"linux": "deb", "windows": "nsis", "macos": "macos"}

# a wheel's platform tag → the ortbundle target it serves
PLATFORM_TARGETS = (
    (re.compile(r"manylinux_\d+_\d+_x86_64"), "linux-x86_64"),
    (re.compile(r"manylinux_\d+_\d+_aarch64"), "linux-aarch64"),
    (re.compile(r"win_amd64"), "windows-x86_64"),
    (re.compile(r"win_arm64"), "windows-arm64"),
    (re.compile(r"macosx_\d+_\d+_(arm64|universal2)"), "macos-arm64"),
)
# the truth's kind of library → the recipe kind ortbundle writes for it; the first kind found
# among a wheel's libraries is the package's
KINDS = {"core": "runtime", "plugin-ep": "plugin-ep", "custom-ops": "custom-ops"}
KINDS["uses-core"] = "uses-core"


@dataclass(frozen=True)
class Case:
    package: str
    version: str
    platform: str
    target: str
    core: str | None  # the stock onnxruntime version scaffolded first; None: it ships a core

    @property
    def title(self) -> str:
        return f"{self.package} {self.version} {self.target}"


@dataclass(frozen=True)
class Step:
    """One command as the user runs it: its line, exit code and everything it printed."""

    command: str
    code: int
    output: str
    failure: str  # the last message of a failed command ("" on success)


@dataclass(frozen=True)
class Facts:
    """What one side says of a package and target, in the fields the verdict compares."""

    kind: str
    entry: tuple[str, ...]  # the entry's file names (the truth may list one file's links)
    providers: tuple[str, ...]
    embedded: tuple[str, ...]
    required: tuple[str, ...]
    optional: tuple[str, ...]
    oldest_os: str


@dataclass(frozen=True)
class Verdict:
    case: Case
    steps: tuple[Step, ...]
    differences: tuple[str, ...] = ()
    skipped: str = ""

    def block(self) -> str:
        lines = [f"### {self.case.title}", ""]
        for step in self.steps:
            said = f" — {_one_line(step.failure)}" if step.failure else ""
            lines.append(f"- `{step.command}`: exit {step.code}{said}")
        if self.skipped:
            lines.append(f"- skipped: {self.skipped}")
        elif self.differences:
            lines += [f"- {d}" for d in self.differences]
        else:
            lines.append("- match")
        return "\n".join(lines) + "\n"

    @property
    def summary(self) -> str:
        if self.skipped:
            return "skipped"
        return "match" if not self.differences else f"{len(self.differences)} difference(s)"


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()[:400]


def _norm(name: str) -> str:
    """A component's name as both sides spell it: nlohmann/json and nlohmann-json alike."""
    return name.lower().replace("/", "-")


def load_cases() -> list[Case]:
    pins = tomllib.loads((CORPUS / "pins.toml").read_text("utf-8"))
    wanted = {p for p in os.environ.get(ENV_SUBSET, "").split(",") if p}
    cases = []
    for package, pin in pins.items():
        if wanted and package not in wanted:
            continue
        for platform in pin["platforms"]:
            (target,) = [t for pattern, t in PLATFORM_TARGETS if pattern.fullmatch(platform)]
            cases.append(Case(package, pin["version"], platform, target, pin.get("core")))
    return cases


def truth_target(case: Case) -> dict[str, Any]:
    table = tomllib.loads((CORPUS / f"{case.package}.toml").read_text("utf-8"))
    (found,) = [t for t in table["target"] if t["platform"] == case.platform]
    assert isinstance(found, dict)
    return found


def _value(fact: Any) -> Any:
    return fact["value"] if isinstance(fact, dict) and "how" in fact else fact


def _basename(path: str) -> str:
    """A file's name, its CPython tag aside: the truth read one Python's wheel (cp312), the
    scaffold picks the newest Python's, whose native files are named for it (cp313)."""
    return CPYTHON.sub(".cpython-3xx", path.rsplit("/", 1)[-1])


def _oldest(values: Iterable[Any], target: str) -> str:
    """The newest minimum among the files' (the oldest system all of them run on)."""
    versions: list[tuple[int, ...]] = []
    for value in values:
        text = value["os_version"] if isinstance(value, dict) else str(value)
        if match := re.search(r"(\d+(?:\.\d+)+)", text):
            versions.append(tuple(int(p) for p in match.group(1).split(".")))
    if not versions:
        return ""
    newest = ".".join(map(str, max(versions)))
    family = {"linux": "glibc", "windows": "Windows NT", "macos": "macOS"}[target.split("-")[0]]
    return f"{family} {newest}"


def _dated() -> dict[str, Any]:
    """The documented dates the truth's Windows facts are held to: which Windows first has an
    API set, a function, a DLL, a machine (ortbundle/data, each entry with its source)."""
    data = ROOT / "ortbundle/data"
    baselines = tomllib.loads((data / "baselines.toml").read_text("utf-8"))["windows"]
    apisets = tomllib.loads((data / "windows-apisets.toml").read_text("utf-8"))["apisets"]
    return {
        "apisets": {name: str(v["since"]) for name, v in apisets.items()},
        "functions": {
            f"{dll.lower()}!{fn}": str(since)
            for dll, names in baselines["functions"].items()
            for fn, since in names.items()
        },
        "dlls": {k.lower(): str(v) for k, v in baselines.get("dlls", {}).items()},
        "machines": {k: str(v) for k, v in baselines.get("machines", {}).items()},
    }


_DATED = _dated()
_CONTRACT = re.compile(r"^(.*-l\d+-\d+-)(\d+)$")


def _apiset_since(name: str, dated: Mapping[str, str]) -> str | None:
    """When an API set came: its own date, else its contract's highest lower revision's (a
    higher revision has all a lower one has)."""
    if name in dated:
        return dated[name]
    match = _CONTRACT.match(name)
    if match is None:
        return None
    lower = [
        (int(m.group(2)), since)
        for other, since in dated.items()
        if (m := _CONTRACT.match(other))
        and m.group(1) == match.group(1)
        and int(m.group(2)) < int(match.group(2))
    ]
    return max(lower)[1] if lower else None


def _pe_floor(lib: Mapping[str, Any]) -> Any:
    """A file's oldest system: for a PE file, the newest of its header's OS version and what
    its API sets, dated functions, DLLs and machine need (the truth's facts, the documented
    dates); for the others, the truth's value as it is."""
    value = _value(lib["oldest_os"])
    if not isinstance(value, dict) or "api_sets" not in value:
        return value
    dated = _DATED
    found = [value["os_version"]]
    found += [
        s
        for n in value["api_sets"]
        if (s := _apiset_since(n.removesuffix(".dll"), dated["apisets"]))
    ]
    found += [dated["functions"][f] for f in value.get("functions", []) if f in dated["functions"]]
    found += [
        dated["dlls"][n.lower()] for n in _value(lib["required"]) if n.lower() in dated["dlls"]
    ]
    machine = _value(lib.get("machine", {"value": ""}))
    found += [dated["machines"][m] for m in dated["machines"] if m in str(machine).upper()]
    return max(found, key=lambda v: tuple(int(p) for p in re.findall(r"\d+", v)) or (0,))


def truth_facts(case: Case, staged: set[str] | None) -> Facts:
    """What the independent readers say, over the files ortbundle staged (all the wheel's
    files of the package's kind when nothing was staged)."""
    target = truth_target(case)
    libraries = target["library"]
    kinds = [_value(lib["kind"]) for lib in libraries]
    kind = next((k for k in KINDS if k in kinds), "other")
    entries = [lib for lib in libraries if _value(lib["kind"]) == kind]
    plain = [e for e in entries if not any(s.startswith("PyInit_") for s in _value(e["entry"]))]
    entry = tuple(sorted(_basename(e["path"]) for e in (plain or entries)))
    ours = [
        lib
        for lib in libraries
        if (_basename(lib["path"]) in staged if staged is not None else lib in entries)
    ]
    # a library's own files answer to their names and install names ("@rpath/libx.1.dylib")
    inside = {_basename(lib["path"]).lower() for lib in libraries}
    inside |= {_basename(_value(lib.get("soname", ""))).lower() for lib in libraries} - {""}
    required = {
        n for lib in ours for n in _value(lib["required"]) if _basename(n).lower() not in inside
    }
    optional = {
        n
        for lib in ours
        for group in ("delay_or_weak", "named_in_strings")
        for n in _value(lib["optional"])[group]
        if _basename(n).lower() not in inside
    }
    # a judgement recorded with its evidence: a library the runtime works without
    judged = {j["name"] for j in target.get("judgement", []) if j["optional"]}
    optional |= required & judged
    required -= judged
    linked = {n.lower() for n in required} | {_basename(n).lower() for n in required}
    optional = {n for n in optional if n.lower() not in linked}  # Windows names ignore case
    mentioned = {p for lib in ours for p in _value(lib["providers"])}
    mentioned |= set(_value(target["ep_names_in_python"]))
    return Facts(
        kind=KINDS.get(kind, kind),
        entry=entry,
        providers=tuple(sorted(mentioned)),
        embedded=tuple(sorted({_norm(e["name"]) for lib in ours for e in lib["embedded"]})),
        required=tuple(sorted(required, key=str.lower)),
        optional=tuple(sorted(optional, key=str.lower)),
        oldest_os=_oldest((_pe_floor(lib) for lib in ours), case.target),
    )


def appended_providers(case: Case, staged: set[str] | None) -> tuple[str, ...]:
    """A core's `OrtSessionOptionsAppendExecutionProvider_X` exports: providers it offers for
    certain, as the provider names its bytes spell (X = CPU, CoreML, DML)."""
    facts = truth_facts(case, staged)
    out = []
    for lib in truth_target(case)["library"]:
        for symbol in _value(lib["entry"]):
            if not symbol.startswith("OrtSessionOptionsAppendExecutionProvider_"):
                continue
            short = symbol.rsplit("_", 1)[1].lower()
            out += [p for p in facts.providers if p.lower() == f"{short}executionprovider"]
    return tuple(sorted(set(out)))


def _capture(command: str, root: Path, action: Any) -> tuple[Step, Any]:
    """Run `action` as the command line would, its output captured: a typed failure becomes
    its message and exit code; anything else is a crash, kept with its traceback. The user's
    project directory reads `<project>` (it is theirs to name; any other temporary path left
    is one of ortbundle's own)."""
    out = io.StringIO()
    value: Any = None
    code, failure = 0, ""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            value = action()
        except CommandFailed as exc:
            code, failure = exc.code, str(exc)
        except OrtbundleError as exc:
            code, failure = exc.exit_code, headline(exc)
        except Exception as crash:  # noqa: BLE001 — a crash: kept whole, the next test greps it
            code, failure = 1, "".join(traceback.format_exception(crash))
    return Step(command, code, _mask(out.getvalue(), root), _mask(failure, root)), value


def _mask(text: str, root: Path) -> str:
    """The user's project and ortbundle's download cache, named as places, not paths: the
    page is the same on every machine."""
    return text.replace(str(root), "<project>").replace(str(default_cache_dir()), "<cache>")


def scaffold(root: Path, coordinates: str, target: str) -> Step:
    options = ScaffoldOptions(coordinates, product=PRODUCT, targets=(target,))
    line = f"invoke new-recipe -s {coordinates} --product {PRODUCT} -t {target}"
    step, _ = _capture(line, root, lambda: run_new_recipe(options, root=root))
    return step


def ortbundle_facts(case: Case, result: BuildResult, recipe: Mapping[str, Any]) -> Facts:
    name = case.package  # the scaffold names the recipe after the project
    (target,) = result.targets
    (staged,) = [r for r in target.runtimes if r.runtime == name]
    needs = target.requirements.runtime(name)
    component = recipe["component"]
    per_target = recipe.get("targets", {}).get(case.target, {})
    providers = list(per_target.get("providers", component.get("providers", [])))
    if component.get("ep_name"):
        providers.append(component["ep_name"])
    kept = {_basename(k.name) for k in staged.closure.kept}
    kept |= {_basename(link) for link, _ in staged.closure.links}
    embedded = {
        _norm(use.code.name)
        for c in target.licensing.components
        for use in c.embedded
        if _basename(use.path) in kept
    }
    # its own needs: the target's model makes a paired library's needs optional for the
    # runtime it pairs with; the closure keeps what each is to the library itself
    required = {e.name for e in staged.closure.externals if not e.optional}
    required |= set(staged.closure.beside)  # the core a library using one links
    optional = {e.name for e in staged.closure.externals if e.optional}
    optional |= {o.name for o in staged.closure.offered}
    optional |= {n for scan in staged.closure.load_scans for n in scan.scan.names}
    inside = {n.lower() for n in kept | required}
    optional = {n for n in optional if _basename(n).lower() not in inside}
    system = needs.system
    minimum = system.glibc or system.windows or system.macos
    oldest = ""
    if minimum is not None:
        family = {"linux": "glibc", "windows": "Windows NT", "macos": "macOS"}
        oldest = f"{family[case.target.split('-')[0]]} {minimum.version}"
    return Facts(
        kind=component["kind"],
        entry=(_basename(staged.closure.entry),),
        providers=tuple(providers),
        embedded=tuple(sorted(embedded)),
        required=tuple(sorted(required, key=str.lower)),
        optional=tuple(sorted(optional, key=str.lower)),
        oldest_os=oldest,
    )


def _show(values: Iterable[str]) -> str:
    shown = list(values)
    return "[" + ", ".join(shown) + "]" if shown else "[]"


def compare(case: Case, truth: Facts, found: Facts, appended: tuple[str, ...]) -> list[str]:
    """Each field where ortbundle and the truth differ, as `field: truth … vs ortbundle …`."""
    out = []
    if truth.kind != found.kind:
        out.append(f"kind: truth {truth.kind} vs ortbundle {found.kind}")
    if not set(found.entry) <= set(truth.entry):
        out.append(f"entry: truth {' | '.join(truth.entry)} vs ortbundle {found.entry[0]}")
    # a core's bytes name every provider of ONNX Runtime: ortbundle's list must be among the
    # names the bytes give, and hold each provider the core exports an Append function for
    unnamed = [p for p in found.providers if p not in truth.providers]
    missing = [p for p in appended if p not in found.providers]
    declares = found.kind in ("runtime", "plugin-ep")  # the kinds whose recipe names them
    if unnamed or missing or (declares and truth.providers and not found.providers):
        out.append(
            f"providers: truth names {_show(truth.providers)} (appended {_show(appended)}) "
            f"vs ortbundle {_show(found.providers)}"
        )
    for label, theirs, ours in (
        ("embedded", truth.embedded, found.embedded),
        ("required", truth.required, found.required),
        ("optional", truth.optional, found.optional),
    ):
        t_keys = {n.lower(): n for n in theirs}
        o_keys = {n.lower(): n for n in ours}
        only_truth = [t_keys[k] for k in sorted(t_keys.keys() - o_keys.keys())]
        only_ours = [o_keys[k] for k in sorted(o_keys.keys() - t_keys.keys())]
        if only_truth or only_ours:
            out.append(
                f"{label}: truth only {_show(only_truth)} vs ortbundle only {_show(only_ours)}"
            )
    if truth.oldest_os != found.oldest_os:
        out.append(f"oldest OS: truth {truth.oldest_os or '—'} vs ortbundle {found.oldest_os}")
    return out


def run_case(case: Case, tmp: Path) -> Verdict:
    root = tmp / "app"
    (root / "licenses").mkdir(parents=True)
    (root / "licenses/policy.toml").write_text(REPO_POLICY.read_text("utf-8"))
    steps: list[Step] = []
    if case.core is not None:
        admits = [SpecifierSet(r.split("onnxruntime", 1)[1]) for r in _requires(case)]
        assert all(case.core in s for s in admits), (case, admits)
        steps.append(scaffold(root, f"pypi:onnxruntime=={case.core}", case.target))
    steps.append(scaffold(root, f"pypi:{case.package}=={case.version}", case.target))
    recipe_path = root / "recipes" / f"{case.package}.toml"
    if not recipe_path.is_file() or any(s.code not in (0, 8) for s in steps):
        return Verdict(case, tuple(steps), _unreachable(case, steps))
    if steps[-1].code == 8 and _CHOICE in recipe_path.read_text("utf-8"):
        steps.append(make_the_choice(recipe_path))
    recipe = tomllib.loads(recipe_path.read_text("utf-8"))
    options = BuildOptions(product=PRODUCT, targets=(case.target,), audit_only=True)
    line = f"invoke audit -p {PRODUCT}"  # the scaffolded product holds this target only
    step, result = _capture(line, root, lambda: build(Project.at(root), options, plain_reporter()))
    steps.append(step)
    if step.code == AuditFailed.exit_code:
        # the audit refused (a scaffolded recipe's guesses wait for a person): the build that
        # is not a release goes on to the packages, and its result holds what the stage found
        # (one channel: the stage is the same for every channel)
        channel = QUICK_CHANNEL[case.target.split("-")[0]]
        options = replace(options, audit_only=False, channels=(channel,))
        line = f"invoke package -p {PRODUCT} --channel {channel}"
        step, result = _capture(
            line, root, lambda: build(Project.at(root), options, plain_reporter())
        )
        steps.append(step)
    if result is None:
        return Verdict(case, tuple(steps), _unreachable(case, steps, recipe))
    found = ortbundle_facts(case, result, recipe)
    staged = {_basename(k.name) for r in result.targets[0].runtimes for k in r.closure.kept}
    truth = truth_facts(case, staged)
    return Verdict(case, tuple(steps), tuple(compare(case, truth, found, _append(case, staged))))


_CHOICE = "# [[externals]]"
_CHOSEN = {
    'group = "FILL-IN"': 'group = "vendor-stack"',
    'install = "FILL-IN"': 'install = "the vendor\'s stack"',
}


def make_the_choice(recipe: Path) -> Step:
    """What the person the scaffold left a choice to does, the plainest way: the commented
    [[externals]] block it wrote for what nothing provides is uncommented as a required group
    of the vendor's stack (the CUDA toolkit, CANN, NVML), so the build goes on."""
    lines = recipe.read_text("utf-8").splitlines()
    start = lines.index(_CHOICE)
    for at in range(start, len(lines)):
        if not lines[at].startswith("# "):
            break
        line = lines[at][2:]
        for blank, chosen in _CHOSEN.items():
            line = line.replace(blank, chosen)
        lines[at] = line
    recipe.write_text("\n".join(lines) + "\n", "utf-8")
    return Step(
        f"(the choice: {recipe.name}'s [[externals]] block uncommented as group vendor-stack)",
        0,
        "",
        "",
    )


def _append(case: Case, staged: set[str] | None) -> tuple[str, ...]:
    return appended_providers(case, staged)


def _requires(case: Case) -> list[str]:
    return list(_value(truth_target(case)["requires_onnxruntime"]))


def _unreachable(
    case: Case, steps: list[Step], recipe: Mapping[str, Any] | None = None
) -> tuple[str, ...]:
    """When nothing was built: the kind the scaffold wrote, if it wrote one, against the truth."""
    truth = truth_facts(case, None)
    if recipe is None:
        return (f"kind: truth {truth.kind} vs ortbundle (no recipe written)",)
    kind = recipe["component"]["kind"]
    out = [f"kind: truth {truth.kind} vs ortbundle {kind}"] if kind != truth.kind else []
    return (*out, "(not built: nothing else to compare)")


def render(verdicts: list[Verdict]) -> str:
    head = [
        "# The conformance corpus: verdicts",
        "",
        "Generated by `tests/test_corpus.py` (do not edit by hand); regenerate with",
        "`ORTBUNDLE_CORPUS_WRITE=1 python3 -m pytest -p no:cacheprovider tests/test_corpus.py`",
        "and review the difference. Each package and target of `tests/data/corpus/pins.toml` is",
        "scaffolded into a fresh project (`new-recipe … --product acme -t TARGET`, after the stock",
        "core pins.toml names for a package that ships none), built with the audit only, and",
        "compared with its truth table (`tests/data/corpus/<package>.toml`, see",
        "[corpus.md](corpus.md)) over the files ortbundle staged.",
        "",
        "Providers: a core's bytes name every provider of ONNX Runtime, so ortbundle's list must",
        "be among the names the bytes give and hold each provider the core exports an",
        "`OrtSessionOptionsAppendExecutionProvider_X` for. Optional system libraries: the truth's",
        "delay-loaded or weak libraries and the library names in the files' strings; ortbundle's",
        "optional externals, the core's offered provider libraries and the names its load scan",
        "reads. The truth read the cp312 wheels and the scaffold picks the newest Python's, so",
        "file names are matched with their CPython tag aside (`.cpython-3xx`). Messages name the",
        "project and the download cache as `<project>` and `<cache>`.",
        "",
        "| package | version | target | verdict |",
        "|---|---|---|---|",
    ]
    head += [
        f"| {v.case.package} | {v.case.version} | {v.case.target} | {v.summary} |" for v in verdicts
    ]
    return (
        "\n".join(head)
        + "\n\n## Per package and target\n\n"
        + "\n".join(v.block() for v in verdicts)
    )


def committed_blocks(page: str) -> dict[str, str]:
    """The committed page's block per case title."""
    blocks = re.split(r"(?m)^(?=### )", page.split("## Per package and target\n\n", 1)[-1])
    return {b.splitlines()[0][4:]: b.rstrip("\n") + "\n" for b in blocks if b.startswith("### ")}


@dataclass
class Run:
    verdicts: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    run = Run()
    start = time.monotonic()
    unreachable = ""
    for case in load_cases():
        if unreachable:  # the scaffold asks the index for every release: the rest would too
            run.verdicts.append(Verdict(case, (), skipped=f"not run: {unreachable}"))
            continue
        tmp = tmp_path_factory.mktemp(re.sub(r"[^a-z0-9]+", "-", case.title.lower()))
        verdict = run_case(case, tmp)
        if missing := _network_missing(verdict):
            verdict = Verdict(case, verdict.steps, skipped=missing)
            unreachable = "the package index is unreachable" if "index page" in missing else ""
        run.verdicts.append(verdict)
        print(verdict.block())  # the log shows each verdict as it comes (pytest -s)
    run.seconds = time.monotonic() - start
    print(f"corpus: {len(run.verdicts)} case(s) in {run.seconds:.0f} s")  # the tier's time
    return run


def _network_missing(verdict: Verdict) -> str:
    """What could not be fetched, when that is why a step failed (a fetch or offline error),
    named by its step. The scaffold reads the index's page of a release even when its wheel
    is cached, so without the index nothing runs (the builds alone would run from the cache)."""
    for step in verdict.steps:
        if step.code in (FetchError.exit_code, OfflineError.exit_code):
            return f"neither the network nor the cache has it: {step.command}: {step.failure}"
    return ""


def test_the_verdicts_are_the_committed_page(corpus_run: Run) -> None:
    skipped = [v.skipped for v in corpus_run.verdicts if v.skipped]
    if skipped and len(skipped) == len(corpus_run.verdicts):
        pytest.skip("; ".join(skipped))
    if os.environ.get(ENV_WRITE):
        assert not os.environ.get(ENV_SUBSET), "regenerate the page from the whole corpus"
        assert not skipped, skipped  # and from every wheel of it
        PAGE.write_text(render(corpus_run.verdicts), "utf-8")
    committed = committed_blocks(PAGE.read_text("utf-8"))
    for verdict in corpus_run.verdicts:
        if not verdict.skipped:
            assert verdict.block() == committed.get(verdict.case.title), verdict.case.title
    if not os.environ.get(ENV_SUBSET) and not skipped:
        assert PAGE.read_text("utf-8") == render(corpus_run.verdicts)
    if skipped:
        pytest.skip("; ".join(skipped))


def test_no_message_shows_a_traceback_or_a_temporary_path(
    corpus_run: Run, tmp_path_factory: pytest.TempPathFactory
) -> None:
    base = str(tmp_path_factory.getbasetemp())
    assert [s for v in corpus_run.verdicts for s in v.steps], "the corpus ran no command"
    for verdict in corpus_run.verdicts:
        for step in verdict.steps:
            said = step.output + step.failure
            assert TRACEBACK not in said, (verdict.case.title, step.command, said[-2000:])
            assert base not in said and "/tmp/" not in said, (verdict.case.title, step.command)
