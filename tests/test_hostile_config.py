"""Hostile inputs, configuration: a recipe, product or environment that reads as plausible and
would make a build lie (accept what the reference refuses, ship from a glob that matched
nothing) or crash (a value no output can represent).

Each case runs `invoke build` (run_build) and must stop with exit 2 before anything is
fetched or written, naming the file, the table, the key and the fix, with no traceback, or
(a drop that drops nothing) build and say so. The schema's own unit tests are in
tests/test_schema.py; here the mistakes come in the way a user writes them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from tests.helpers.project import FakeProject
from tests.helpers.toml_edit import edit_toml, set_key

CONFIG = ConfigError.exit_code


def _refused(fake: FakeProject) -> str:
    """What `invoke build` said as it refused the project (exit 2), with nothing fetched."""
    fake.server.requests.clear()
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(), root=fake.root)
    message = str(failed.value)
    assert failed.value.code == CONFIG, message
    assert "Traceback" not in message
    assert not (fake.root / "dist").exists()
    return message


@pytest.mark.parametrize(
    ("dotted", "value"),
    [
        ("targets.linux-x86_64.roots", "libonnxruntime.so.*"),
        ("component.providers", "CPUExecutionProvider"),
    ],
)
def test_a_string_where_the_reference_says_list_is_refused(
    fake: FakeProject, dotted: str, value: str
) -> None:
    fake.write()
    set_key(fake.root / "recipes" / "fake.toml", dotted, value)
    message = _refused(fake)
    table, key = dotted.rsplit(".", 1)
    assert (
        f"`{key}`: must be a list of non-empty strings, not {value!r} in [{table}] of "
        "recipes/fake.toml"
    ) in message, message
    assert fake.server.requests == []


def test_a_string_for_drop_names_is_refused(fake: FakeProject) -> None:
    fake.write()

    def change(document: object) -> None:
        document["targets"]["linux-x86_64"]["drop"][0]["names"] = "onnxruntime_pybind11*"  # type: ignore[index]

    edit_toml(fake.root / "recipes" / "fake.toml", change)
    message = _refused(fake)
    assert (
        "`names`: must be a list of non-empty strings, not 'onnxruntime_pybind11*' in "
        "[targets.linux-x86_64.drop[0]] of recipes/fake.toml"
    ) in message, message


def test_a_waiver_sha256_may_still_be_one_string(fake: FakeProject, tmp_path: Path) -> None:
    """The one list key docs/sources.md documents as "a string, or a list"."""
    from ortbundle.config.products import load_product

    fake.product_extra = (
        '\n[[waivers]]\nfile = "x.dll"\nlicense = "MIT"\nreason = "r"\nreviewer = "A Person"\n'
        f'sha256 = "{"a" * 64}"\n'
    )
    fake.write()
    product = load_product(fake.root / "manifests" / "fakeproduct.toml")
    assert product.waivers[0].sha256 == ("a" * 64,)


def test_every_glob_matching_nothing_is_named_in_one_run(fake: FakeProject) -> None:
    """A root one letter off (`provider` for `providers`) on one target and a [[take]] glob
    matching no member on the other: both in one run, each with file, table, key and the
    nearest member of the archive."""
    fake.linux["onnxruntime/capi/libonnxruntime_providers_shared.so"] = fake.linux[
        "onnxruntime/capi/libonnxruntime_shared.so"
    ]
    fake.linux_roots = ["libonnxruntime.so.*", "libonnxruntime_provider_shared.so"]
    fake.write()

    def change(document: object) -> None:
        take = document["targets"]["windows-x86_64"]["take"][0]  # type: ignore[index]
        take["libraries"] = ["onnxruntime/capi/*.dl", "onnxruntime/capi/*.pyd"]

    edit_toml(fake.root / "recipes" / "fake.toml", change)
    fake.server.requests.clear()
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(), root=fake.root)
    message = str(failed.value)
    assert failed.value.code == CONFIG, message
    assert "3 configuration problems in recipes/fake.toml" in message, message
    assert (
        "`roots`: 'libonnxruntime_provider_shared.so' matches no library the [[take]] globs "
        "take from onnxruntime_fake-1.0.0-cp311-cp311-manylinux_2_28_x86_64.whl in "
        "[targets.linux-x86_64] of recipes/fake.toml — did you mean "
        "`libonnxruntime_providers_shared.so`?"
    ) in message, message
    assert (
        "`libraries`: 'onnxruntime/capi/*.dl' matches no member of "
        "onnxruntime_fake-1.0.0-cp311-cp311-win_amd64.whl in "
        "[targets.windows-x86_64.take[0]] of recipes/fake.toml — did you mean "
        "`onnxruntime/capi/dep.dll`?"
    ) in message, message
    # and what follows from the take glob: the root it no longer takes, with the fix
    assert (
        "`roots`: 'onnxruntime.dll' matches no library the [[take]] globs take from "
        "onnxruntime_fake-1.0.0-cp311-cp311-win_amd64.whl in [targets.windows-x86_64] of "
        "recipes/fake.toml — fix: onnxruntime/capi/onnxruntime.dll is in the archive, but no "
        "[[take]] glob takes it"
    ) in message, message
    assert "Traceback" not in message and not (fake.root / "dist").exists()


def test_a_drop_that_drops_nothing_is_a_warning(
    fake: FakeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.write()

    def change(document: object) -> None:
        drop = document["targets"]["linux-x86_64"]["drop"][0]  # type: ignore[index]
        drop["names"] = ["onnxruntime_pybind11_state*", "libonnxruntime_pybind*"]

    edit_toml(fake.root / "recipes" / "fake.toml", change)
    run_build(fake.options(), root=fake.root)
    out = capsys.readouterr().out
    assert (
        "WARNING: drop 'libonnxruntime_pybind*' in [targets.linux-x86_64.drop[0]] of "
        "recipes/fake.toml drops nothing: no library the [[take]] globs take from "
        "onnxruntime_fake-1.0.0-cp311-cp311-manylinux_2_28_x86_64.whl is named so"
    ) in out, out
    run_build(fake.options(cache_dir=fake.root / "cache"), root=fake.root, dist=fake.root / "d2")
    assert "drops nothing" in capsys.readouterr().out  # said again from the memoised runtime


@pytest.mark.parametrize(
    "value",
    [
        "253402300800",  # year 10000: no ISO date, no datetime
        "4294967296",  # 2**32: the rpm's BUILDTIME and file mtimes wrap to 1970
        "²",  # a digit to str.isdigit, not to int()
        "1" * 5000,  # more digits than int() converts
        "-1",
    ],
)
def test_a_source_date_epoch_no_output_can_record_is_refused(fake: FakeProject, value: str) -> None:
    fake.write()
    fake.server.requests.clear()
    with pytest.raises(CommandFailed) as failed:
        run_build(
            fake.options(environ={**fake.environ, "SOURCE_DATE_EPOCH": value}), root=fake.root
        )
    message = str(failed.value)
    assert failed.value.code == CONFIG, message
    assert "SOURCE_DATE_EPOCH" in message and "0 to 4294967295" in message, message
    assert "Traceback" not in message and fake.server.requests == []
    assert not (fake.root / "dist").exists()


def test_the_last_second_every_output_can_record_is_accepted(tmp_path: Path) -> None:
    from ortbundle.config.project import source_date_epoch

    assert source_date_epoch(tmp_path, {"SOURCE_DATE_EPOCH": "4294967295"}) == 4294967295
    assert source_date_epoch(tmp_path, {"SOURCE_DATE_EPOCH": " 0 "}) == 0


def test_a_release_without_a_key_suggests_only_what_exists(fake: FakeProject) -> None:
    """`invoke build -r` with no key: the fix names `invoke keygen` and the two variables a
    build reads (ortbundle/_core/locations.py), and no option `invoke build` does not have."""
    import re

    import tasks
    from ortbundle._core.locations import ENV_KEY, ENV_KEY_FILE

    fake.write()
    environ = {"HOME": str(fake.root / "home"), "SOURCE_DATE_EPOCH": "1700000000"}
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(release=True, environ=environ), root=fake.root)
    message = str(failed.value)
    assert failed.value.code == CONFIG, message
    assert "invoke keygen -p fakeproduct" in message and ENV_KEY in message, message
    assert ENV_KEY_FILE in message, message
    options = {f"--{n.replace('_', '-')}" for arg in tasks.build.get_arguments() for n in arg.names}
    for named in re.findall(r"(?<![\w-])--[a-z][a-z-]+", message):
        assert named in options, f"{named} is no option of invoke build: {message}"


def test_a_waiver_matching_no_shipped_file_is_said_every_time(
    fake: FakeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    """A waiver whose glob matches nothing (a file renamed upstream) accepts nothing, and
    nobody knows it is dead weight unless the build says so: on every build, -v or not, and
    again on a no-op."""
    fake.product_extra = (
        '\n[[waivers]]\nfile = "runtimes/fake/gone-*.dll"\nlicense = "LicenseRef-Gone"\n'
        'reason = "a DLL upstream no longer ships"\nreviewer = "A Person"\n'
    )
    fake.write()
    for _ in range(2):  # the build, then the no-op
        run_build(fake.options(), root=fake.root)
        out = capsys.readouterr().out
        assert "UNUSED WAIVER runtimes/fake/gone-*.dll matches no shipped file" in out, out
        assert "manifests/fakeproduct.toml" in out, out
    assert "up to date" in out


def test_the_plan_counts_the_downloads_the_fetch_verifies(
    fake: FakeProject, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Models pinned elsewhere than the runtime (a file of the project, a URL; or a model
    still on the release `invoke pin` moved the runtime from) are downloads too: the plan's
    count and the fetch's must be the same number."""
    import re
    from http.server import ThreadingHTTPServer

    from tests.test_models import QuietHandler, with_own_model

    root = tmp_path / "www"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: QuietHandler(*a, directory=str(root)))
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with_own_model(fake, (f"http://127.0.0.1:{server.server_address[1]}", root))
        run_build(fake.options(), root=fake.root)
    finally:
        server.shutdown()
        server.server_close()
    out = capsys.readouterr().out
    planned = re.search(r"; (\d+) downloads, ", out)
    fetched = re.search(r"^fetch +(\d+) downloads verified", out, re.M)
    assert planned and fetched, out
    assert planned[1] == fetched[1] == "4", out


@pytest.mark.slow
def test_pin_says_a_waiver_no_longer_matches_the_bytes_it_moves_to(tmp_path: Path) -> None:
    """A waiver signed off for the bytes of bundled.dll in 1.0.0; 1.1.0 ships other bytes
    under the same name. `invoke pin` moves the recipe and must say the waiver no longer
    covers what will ship (a development build still relies on it; a release refuses it)."""
    import hashlib
    from datetime import UTC, datetime, timedelta

    from ortbundle._core.progress import plain_reporter
    from ortbundle.tools.pin import pin
    from tests.helpers.pe import make_pe
    from tests.test_pin import PROJECT, WINDOWS_NEW, Releases, YankingIndex, windows_members

    reviewed = hashlib.sha256(windows_members("1.0.0")["onnxruntime/capi/bundled.dll"])
    today = datetime.now(UTC).date()
    with YankingIndex().running() as running:
        releases = Releases(root=tmp_path / "project", server=running)
        releases.product_extra = (
            '\n[[waivers]]\nfile = "runtimes/fake/bundled.dll"\nlicense = "MIT"\n'
            'targets = ["windows-x86_64"]\nreason = "its text is on the vendor site"\n'
            f'reviewer = "A. Auditor"\nsha256 = "{reviewed.hexdigest()}"\n'
            f"reviewed = {today - timedelta(days=1)}\nexpires = {today + timedelta(days=90)}\n"
        )
        releases.write()
        text = releases.recipe.read_text()
        releases.recipe.write_text(
            text.replace('texts = [{ file = "bundled-LICENSE.txt" }]', "texts = []")
        )
        releases.publish_next()
        rebuilt = windows_members("1.1.0")
        rebuilt["onnxruntime/capi/bundled.dll"] = make_pe(
            imports=("kernel32.dll",), payload=b"rebuilt"
        )
        releases.publish(PROJECT, WINDOWS_NEW, rebuilt)
        result = pin(releases.project, "fake", releases.pin_options(), plain_reporter())
    assert result.written and result.report is not None, result.lines()
    text = "\n".join(result.lines())
    assert (
        "fakeproduct: waiver waivers[0] (runtimes/fake/bundled.dll) in "
        "manifests/fakeproduct.toml no longer matches the new bytes: "
        "windows-x86_64/runtimes/fake/bundled.dll is sha256"
    ) in text, text
    assert "a --release refuses it" in text, text


@pytest.mark.parametrize(
    ("dotted", "value"),
    [
        ("product.targets", ["linux-x86_64", "linux-x86_64"]),
        ("product.runtimes", ["fake", "fake"]),
    ],
)
def test_a_list_naming_one_thing_twice_is_a_configuration_error_not_a_disk_error(
    fake: FakeProject, dotted: str, value: list[str]
) -> None:
    """A target (or runtime) listed twice staged it twice into one directory: the build said
    "disk error: File exists" (exit 12), blaming dist/ for a mistake in the manifest."""
    fake.write()
    set_key(fake.root / "manifests" / "fakeproduct.toml", dotted, value)
    message = _refused(fake)
    table, key = dotted.rsplit(".", 1)
    assert f"`{key}`: lists {value[0]!r} twice in [{table}] of manifests/fakeproduct.toml" in (
        message
    ), message


def test_a_target_asked_for_twice_is_built_once(fake: FakeProject) -> None:
    """`invoke build -t linux-x86_64 -t linux-x86_64` asks for one target, not a disk error."""
    fake.write()
    run_build(fake.options(targets=("linux-x86_64", "linux-x86_64")), root=fake.root)
    assert (fake.root / "dist" / "fakeproduct" / "1.2.3" / "linux-x86_64").is_dir()
