"""Stock `onnxruntime` released as a new user would (issue #42): scaffolded for every target
the release publishes, refused by `--release` only for what a person must review, released once
those reviews are pasted — no ignore rule for the core's provider table or Windows' own DLLs.

The path, in a project outside the repository, through the shared download cache (a warm run
downloads nothing; the scaffold still reads the index's page of the release, so without the
index the test skips, naming it):

1. `invoke new-recipe -s pypi:onnxruntime==1.32.0 --product acme` (all five targets);
2. `invoke build -p acme --release`: exit 10, and every line that refuses is one of a person's
   reviews — the scaffold's `files` and `texts` guesses of each target's rule (its `expression`
   is read: the classifier and the wheel's MIT LICENSE agree), and Microsoft's "All rights
   reserved" in the Windows DLLs' version resources under the wheel's MIT — each REVIEW with
   its confirmation table ready to paste, every file's sha256 in it; the refusal names the
   recipe and counts what waits there;
3. the person pastes each table (their name and reason in it) and removes the guesses;
4. `invoke build -p acme --release` passes, signed; macOS is indexed CoreML then CPU, and the
   core's provider table is said as "offered by the core, not shipped".

About two minutes warm (the release packages every channel)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ortbundle._core.errors import FetchError, OfflineError
from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.keygen import run_keygen
from ortbundle.cli.scaffold import run_new_recipe
from ortbundle.config.project import BuildOptions
from ortbundle.pipeline.build import AuditFailed
from ortbundle.tools.scaffold import ScaffoldOptions
from tests.helpers.project import REPO_POLICY
from tests.helpers.real import ROOT

pytestmark = [pytest.mark.real, pytest.mark.timeout(900)]

VERSION = "1.32.0"
PRODUCT = "acme"
TARGETS = ("linux-x86_64", "linux-aarch64", "windows-x86_64", "windows-arm64", "macos-arm64")
WINDOWS = ("windows-x86_64", "windows-arm64")
RECIPE = "recipes/onnxruntime.toml"
RUNTIME = "runtimes/onnxruntime"
TABLE = re.compile(
    r"^(\[targets\.[a-z0-9_-]+\.licenses\.confirmed\]\n.*?^reviewed = \S+\n)", re.M | re.S
)
# what the person writes in each table they paste, for the placeholders a release refuses
REVIEWER = 'reviewer = "A. Person"'
REASON = (
    "reason = \"Microsoft's own DLLs, signed by Microsoft; the wheel's LICENSE is "
    "Microsoft's MIT, and its ThirdPartyNotices names the code they carry\""
)


def _release(root: Path, key: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    options = BuildOptions(product=PRODUCT, release=True, signing_key=key)
    try:
        run_build(options, root=root)
        code, failure = 0, ""
    except CommandFailed as exc:
        code, failure = exc.code, str(exc)
    out = capsys.readouterr()
    return code, out.out + out.err + failure


def test_stock_onnxruntime_is_released_after_only_a_persons_reviews(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "app"
    (root / "licenses").mkdir(parents=True)
    (root / "licenses/policy.toml").write_text(REPO_POLICY.read_text("utf-8"))
    coordinates = f"pypi:onnxruntime=={VERSION}"
    try:
        run_new_recipe(ScaffoldOptions(coordinates, product=PRODUCT), root=root)
    except CommandFailed as exc:
        if exc.code in (FetchError.exit_code, OfflineError.exit_code):
            pytest.skip(f"the index or the cache lacks {coordinates}: {exc}")
        raise
    recipe_path = root / RECIPE
    recipe = tomllib.loads(recipe_path.read_text("utf-8"))
    assert set(recipe["targets"]) == set(TARGETS)
    key = tmp_path / "keys" / f"{PRODUCT}.key"
    run_keygen(PRODUCT, secret=key, public=None, force=False, root=root)
    capsys.readouterr()

    # 1. the first release: refused, for the person's reviews only
    code, said = _release(root, key, capsys)
    assert code == AuditFailed.exit_code, said
    refusing = [line for line in said.splitlines() if line.startswith(("FAIL ", "REVIEW "))]
    assert refusing, said
    guesses = {
        (m[1], m[2])
        for line in refusing
        if (m := re.search(r"`(\w+)` of its \[\[targets\.([a-z0-9_-]+)\.licenses\]\] rule", line))
    }
    # `expression` is read from the bytes; `files` and `texts` are the person's to check
    assert guesses == {(k, t) for k in ("files", "texts") for t in TARGETS}, refusing
    reviews = [line for line in refusing if line.startswith("REVIEW ")]
    assert len(reviews) == len(WINDOWS), reviews
    for target, review in zip(WINDOWS, reviews, strict=True):
        assert f"{target}/runtimes/onnxruntime/onnxruntime.dll" in review
        assert "'© Microsoft Corporation. All rights reserved.'" in review
        assert "under the permissive claim MIT" in review
        assert "for each of these 2 files" in review and RECIPE in review
    for line in refusing:  # every refusing line is a guess or a reserved-rights review
        assert "scaffold's guess" in line or "under the permissive claim MIT" in line, line
    # none of the false alarms #42 found: a load from the core's provider table, a Windows
    # DLL nothing provides, a valid Microsoft signature read as broken (signify in threads)
    for alarm in ("undeclared", "nothing provides", "ignore_loads", "Authenticode", "exit 8"):
        assert alarm not in said, alarm
    # the refusal counts what waits in the recipe, once for the build
    assert (
        f"in {RECIPE}: 10 keys the scaffold guessed (check each, then remove it from its rule's "
        "`guessed`) and 2 [confirmed] tables printed above to paste once a person has reviewed "
        "its files"
    ) in said
    tables = list(dict.fromkeys(TABLE.findall(said)))
    assert len(tables) == len(WINDOWS), said

    # 2. the person's reviews: each table pasted as printed, their name and reason in it, and
    # the guesses removed once checked; nothing else in the recipe changes
    text = recipe_path.read_text("utf-8")
    text = re.sub(r"^guessed = .*\n", "", text, flags=re.M)
    for table in tables:
        table = re.sub(r"^reviewer = .*$", REVIEWER, table, flags=re.M)
        text += "\n" + re.sub(r"^reason = .*$", REASON, table, flags=re.M)
    recipe_path.write_text(text, "utf-8")
    assert "ignore_loads" not in text and "[[externals]]" not in text

    # 3. the second release passes, signed
    code, said = _release(root, key, capsys)
    assert code == 0, said
    assert "signed: manifest.json by key" in said
    version_dir = root / "dist" / PRODUCT / "0.1.0"
    index = {
        t: json.loads((version_dir / t / "runtimes.json").read_text("utf-8"))["runtimes"]
        for t in TARGETS
    }
    assert [r["providers"] for r in index["macos-arm64"]] == [
        ["CoreMLExecutionProvider", "CPUExecutionProvider"]
    ]
    (linux,) = index["linux-x86_64"]
    offered = {o["library"]: o["provider"] for o in linux["offered_not_shipped"]}
    assert offered["libonnxruntime_providers_cuda.so"] == "CUDAExecutionProvider", offered
    assert "offered by the core, not shipped: " in said

    # the pasted tables hold the staged files' own sha256, and no other
    pasted = tomllib.loads(recipe_path.read_text("utf-8"))
    for target in WINDOWS:
        staged = version_dir / target / RUNTIME
        dlls = sorted(staged.glob("*.dll"))
        confirmed = pasted["targets"][target]["licenses"][0]["confirmed"]
        assert sorted(confirmed["sha256"]) == sorted(
            hashlib.sha256(p.read_bytes()).hexdigest() for p in dlls
        )

    # Microsoft's signatures read valid however many threads read them at once: signify's
    # shared root store, parsed lazily on first use, raced ("No field numbered 1 is present
    # in this asn1crypto…") and a valid signature read as broken. A fresh interpreter, so the
    # store is first parsed by the racing threads
    signed = [str(p) for t in WINDOWS for p in sorted((version_dir / t / RUNTIME).glob("*.dll"))]
    done = subprocess.run(
        [sys.executable, "-c", _READ_IN_THREADS, *signed],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["valid"] * 2 * len(signed), done.stdout


_READ_IN_THREADS = """
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from ortbundle.stage.binaries.authenticode import read_signature
paths = [Path(p) for p in sys.argv[1:]] * 2
with ThreadPoolExecutor(4) as pool:
    for signature in pool.map(read_signature, paths):
        print(signature.status, signature.problem.replace(" ", "_"))
"""
