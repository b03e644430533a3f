"""The NSIS channel: escaping, the generated script, integrity checks, and real makensis/7z runs."""

from __future__ import annotations

import hashlib
import lzma
import os
import re
import shutil
import struct
import subprocess
from dataclasses import replace
from pathlib import Path, PurePosixPath

import pefile
import pytest

from ortbundle._core.errors import ConfigError, IntegrityError, PackagingError
from ortbundle.channels import PackageInput
from ortbundle.channels.nsis import NsisChannel, _version_quad, nsis_string
from ortbundle.channels.packagers import compression
from ortbundle.config.products import Addon
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.closure import ExternalLibrary
from tests.helpers.packages import SETTINGS, make_package_input

HAVE_MAKENSIS = shutil.which("makensis") is not None
HAVE_7Z = shutil.which("7z") is not None
requires_makensis = pytest.mark.skipif(
    not HAVE_MAKENSIS, reason="makensis not on PATH (Debian/Ubuntu: apt-get install nsis)"
)
requires_7z = pytest.mark.skipif(
    not HAVE_7Z, reason="7z not on PATH (Debian/Ubuntu: apt-get install p7zip-full)"
)

# Every NSIS metacharacter we know of, in the places a manifest could put it.
NASTY = (
    "x $ $$ $0 $INSTDIR ${NSISDIR} ${__DATE__} $%PATH% $(^Name) $\\n $\\t $\\\" $\\' $\\` "
    "\" ' ` ; # /* */ !define X ${U+41} \\n \\ {a} %b% Démo — 日本"
)
INJECTED = {
    "product": 'Pro$duct ${NSISDIR} "q"',
    "version": "1.2.3-rc.1+$INSTDIR\"`'",
    "description": NASTY + "\nsecond line\ttab\rend $",
    "url": "https://x.invalid/?a=$b&c=${D}$%HOME%\\",
}
INJECTED_SETTINGS = replace(
    SETTINGS,
    publisher="Evil $\\\"Pub'` $(^Name) ${NSISDIR}$%HOME% $\\ end$",
    package_name="demo $(^Name) ${X} $$ 'q' $%HOME%",
)


def _layout(root: Path, **overrides: object) -> tuple[PackageInput, Path]:
    """The build's layout: dist/<product>/<version>/{windows-x86_64,packaging/nsis}."""
    base = root / "dist" / "demo" / "1.0.0"
    return make_package_input(base, "windows-x86_64", **overrides), base / "packaging" / "nsis"


def _script(out: Path) -> str:
    return (out / "installer.nsi").read_text(encoding="utf-8-sig")


def _section(script: str, name: str) -> list[str]:
    body = script.split(f'Section "{name}"\n', 1)[1].split("SectionEnd", 1)[0]
    return [line.strip() for line in body.splitlines() if line.strip()]


def _win(path: str) -> str:
    return path.replace("/", "\\")


def _dirs(package: PackageInput) -> set[str]:
    return {str(p) for f in package.files for p in PurePosixPath(f.path).parents if str(p) != "."}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _nsis_header(exe: bytes) -> bytes:
    """The installer's decompressed header (strings, language tables) of a solid-LZMA build."""
    at = exe.find(b"\xef\xbe\xad\xdeNullsoftInst") - 4
    _flags, _sig, _magic, header_size, _total = struct.unpack_from("<II12sII", exe, at)
    props = exe[at + 28 : at + 33]
    lzma1 = {
        "id": lzma.FILTER_LZMA1,
        "dict_size": int.from_bytes(props[1:5], "little"),
        "lc": props[0] % 9,
        "lp": props[0] // 9 % 5,
        "pb": props[0] // 45,
    }
    decompressor = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[lzma1])
    data = decompressor.decompress(exe[at + 33 :], max_length=4 + header_size)
    assert int.from_bytes(data[:4], "little") == header_size
    return data[4:]


def _version_info(exe: Path) -> dict[str, str]:
    pe = pefile.PE(str(exe))
    try:
        return {
            key.decode(): value.decode()
            for info in pe.FileInfo[0]
            if hasattr(info, "StringTable")
            for table in info.StringTable
            for key, value in table.entries.items()
        }
    finally:
        pe.close()


def _7z_entries(exe: Path) -> list[dict[str, str]]:
    listing = subprocess.run(
        ["7z", "l", "-slt", str(exe)], capture_output=True, text=True, check=True
    ).stdout
    entries = []
    for block in listing.split("----------\n", 1)[1].split("\n\n"):
        fields = dict(line.split(" = ", 1) for line in block.splitlines() if " = " in line)
        if "Path" in fields:
            entries.append(fields)
    return entries


@pytest.fixture
def no_makensis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[PackageInput, Path]:
    package, out = _layout(tmp_path_factory.mktemp("compiled"))
    result = NsisChannel().generate(package, out)
    assert result.files == (out / "demo-1.0.0-setup.exe", out / "installer.nsi")
    return package, out / "demo-1.0.0-setup.exe"


# --- escaping -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", '"plain text"'),
        ("$", '"$$"'),
        ("$$", '"$$$$"'),
        ('a"b', '"a$\\"b"'),
        ("'`", '"$\\\'$\\`"'),
        ("\t\r\n", '"$\\t$\\r$\\n"'),
        ("$\t", '"$$$\\t"'),
        ("${X}", '"$$${U+7B}X}"'),
        ("$%HOME%", '"$$${U+25}HOME%"'),
        ("$\\n", '"$$${U+5C}n"'),
        ('$\\"', '"$$${U+5C}$\\""'),
        ("$(^Name) $INSTDIR", '"$$(^Name) $$INSTDIR"'),
        ("{X} %Y% \\n C:\\", '"{X} %Y% \\n C:\\"'),
        ("; # /* !x", '"; # /* !x"'),
        ("日本 😀", '"日本 😀"'),
    ],
)
def test_nsis_string_runtime(value: str, expected: str) -> None:
    assert nsis_string(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("$", '"${U+24}"'),
        ("${X} $%Y% $\\n", '"${U+24}{X} ${U+24}%Y% ${U+24}\\n"'),
        ("a\"b'`", '"a$\\"b$\\\'$\\`"'),
        ("$\n", '"${U+24}$\\n"'),
    ],
)
def test_nsis_string_verbatim(value: str, expected: str) -> None:
    assert nsis_string(value, expand=False) == expected


def test_nsis_string_prefix() -> None:
    assert nsis_string("a b", prefix="$INSTDIR\\") == '"$INSTDIR\\a b"'
    with pytest.raises(ValueError, match="prefix"):
        nsis_string("x", prefix="$0$")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("a\x00b", "U\\+0000"),
        ("esc\x1b", "U\\+001B"),
        ("nel\x85", "U\\+0085"),
        ("lone \ud800", "U\\+D800"),
        ("ends $\\", "ends in"),
        ("x" * 1024, "longer"),
    ],
)
def test_nsis_string_refuses(value: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        nsis_string(value)


@pytest.mark.parametrize(
    ("version", "quad"),
    [
        ("1.0.0", "1.0.0.0"),
        ("1.22.0rc1", "1.22.0.0"),
        ("v1.2", "1.2.0.0"),
        ("2025.0.0.17942", "2025.0.0.17942"),
        ("1.2.3.4.5", "1.2.3.4"),
        ("1!2.3", "2.3.0.0"),
        ("1.0.70000", "1.0.65535.0"),
        ("1." + "9" * 5000, "1.65535.0.0"),
        ("007.08", "7.8.0.0"),
        ("nightly", "0.0.0.0"),
        ("$INSTDIR", "0.0.0.0"),
    ],
)
def test_version_quad(version: str, quad: str) -> None:
    assert _version_quad(version) == quad


# --- the script -------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_makensis")
def test_missing_makensis_is_a_note_and_the_script_is_written(tmp_path: Path) -> None:
    package, out = _layout(tmp_path)
    result = NsisChannel().generate(package, out)
    assert result.channel == "nsis"
    assert result.files == (out / "installer.nsi",)
    assert sorted(p.name for p in out.iterdir()) == ["installer.nsi"]
    assert "was not compiled" in result.notes[0]
    assert "apt-get install nsis" in result.notes[0]
    assert str(tmp_path) not in " ".join(result.notes)


@pytest.mark.usefixtures("no_makensis")
def test_compressor_is_the_build_kinds_from_the_packagers_table(tmp_path: Path) -> None:
    """A release compresses as data/packagers.toml says for a release (solid LZMA, the smallest
    installer), a development build as it says for one (faster, bigger): one SetCompressor line
    each, and nothing else in the script differs."""
    scripts = {}
    for release in (True, False):
        package, out = _layout(tmp_path / str(release))
        NsisChannel().generate(replace(package, release=release), out)
        scripts[release] = _script(out).splitlines()
    for release, script in scripts.items():
        wanted = compression("nsis", release)["compressor"]
        assert [line for line in script if line.startswith("SetCompressor")] == [
            f"SetCompressor {wanted}"
        ]
    assert "SetCompressor /SOLID lzma" in scripts[True]
    assert "SetCompressor /SOLID lzma" not in scripts[False]
    differ = [(a, b) for a, b in zip(scripts[True], scripts[False], strict=True) if a != b]
    assert len(differ) == 1


@pytest.mark.usefixtures("no_makensis")
def test_script_installs_every_stage_file_by_relative_path(tmp_path: Path) -> None:
    package, out = _layout(tmp_path)
    NsisChannel().generate(package, out)
    raw = (out / "installer.nsi").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # UTF-8 BOM: makensis on Windows needs no flags
    script = _script(out)
    assert str(tmp_path) not in script
    for line in (
        "Unicode true",
        "SetDateSave off",
        "RequestExecutionLevel admin",
        'InstallDir "$PROGRAMFILES64\\demo-onnxruntime"',
        'OutFile "demo-1.0.0-setup.exe"',
        "VIProductVersion 1.0.0.0",
        "!include x64.nsh",
    ):
        assert line in script.splitlines()
    assert script.count("SetRegView 64") == 2  # installer and uninstaller
    assert "${IfNot} ${RunningX64}" in script

    install = _section(script, "Install")
    sources = [line.removeprefix("File ") for line in install if line.startswith("File ")]
    assert sorted(sources) == sorted(
        f'"..\\..\\windows-x86_64\\{_win(f.path)}"' for f in package.files
    )
    # each File lands in the stage's directory: the SetOutPath before it is its parent
    target = ""
    for line in install:
        if line.startswith("SetOutPath "):
            target = line.removeprefix("SetOutPath ").strip('"')
        elif line.startswith("File "):
            parent = line.removeprefix('File "..\\..\\windows-x86_64\\').rsplit("\\", 1)
            want = "$INSTDIR\\" + parent[0] if len(parent) == 2 else "$INSTDIR"
            assert target == want, line
    key = '"Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\demo-onnxruntime"'
    size_kib = -(-sum(f.size for f in package.files) // 1024)
    for value in (
        '"DisplayName" "demo"',
        '"DisplayVersion" "1.0.0"',
        '"Publisher" "Demo Org"',
        '"InstallLocation" "$INSTDIR"',
        '"UninstallString" "$\\"$INSTDIR\\uninstall.exe$\\""',
    ):
        assert f"WriteRegStr HKLM {key} {value}" in install
    for value in ('"NoModify" 1', '"NoRepair" 1', f'"EstimatedSize" {size_kib}'):
        assert f"WriteRegDWORD HKLM {key} {value}" in install


@pytest.mark.usefixtures("no_makensis")
def test_uninstaller_removes_exactly_what_was_installed(tmp_path: Path) -> None:
    package, out = _layout(tmp_path)
    NsisChannel().generate(package, out)
    script = _script(out)
    assert not re.search(r"RMDir\s+/r", script, re.IGNORECASE)
    uninstall = _section(script, "Uninstall")
    deletes = [line for line in uninstall if line.startswith("Delete ")]
    assert sorted(deletes) == sorted(
        [f'Delete "$INSTDIR\\{_win(f.path)}"' for f in package.files]
        + ['Delete "$INSTDIR\\uninstall.exe"']
        + ['Delete "$INSTDIR\\demo-onnxruntime-setup.log"']  # what the requirement check logged
    )
    assert not any("*" in line or "?" in line for line in deletes)
    rmdirs = [line.removeprefix("RMDir ") for line in uninstall if line.startswith("RMDir")]
    assert rmdirs[-1] == '"$INSTDIR"'
    removed = [r.strip('"').removeprefix("$INSTDIR\\") for r in rmdirs[:-1]]
    assert sorted(removed) == sorted(_win(d) for d in _dirs(package))
    depths = [r.count("\\") for r in removed]
    assert depths == sorted(depths, reverse=True)  # a directory after everything inside it
    assert uninstall[-1].startswith("DeleteRegKey HKLM ")


@pytest.mark.usefixtures("no_makensis")
def test_the_requirement_check_looks_for_redist_toolkit_and_driver_dlls_as_windows_does(
    tmp_path: Path,
) -> None:
    package, out = _layout(tmp_path)
    user = ("runtimes/openvino/onnxruntime.dll",)
    extra = (
        ExternalLibrary(
            "cudnn64_9.dll", "cudnn", "toolkit", "cuDNN", user, version=">=9.1", install="Get cuDNN"
        ),
        ExternalLibrary("OpenCL.dll", "opencl", "driver", "the GPU driver", user, optional=True),
    )
    package = replace(package, externals=package.externals + extra)
    result = NsisChannel().generate(package, out)
    script = _script(out)
    oninit = script.split("Function .onInit\n", 1)[1].split("FunctionEnd", 1)[0]
    checked = re.findall(r'SearchPath \$R9 "([^"]+)"', oninit)
    # every non-system DLL, looked up on the DLL search path (System32 included); KERNEL32 not
    assert checked == ["cudnn64_9.dll", "MSVCP140.dll", "VCRUNTIME140.dll", "OpenCL.dll"]
    assert "IfFileExists" not in oninit
    redist = "Microsoft Visual C++ 2015-2022 Redistributable (x64)"
    assert f"  MSVCP140.dll, VCRUNTIME140.dll — {redist} (needed by OpenVINO)" in oninit
    assert "  cudnn64_9.dll (>=9.1) — Get cuDNN (needed by OpenVINO)" in oninit  # not the note
    assert "  OpenCL.dll — the GPU driver (without it, OpenVINO loses the rung" in oninit
    lines = [line.strip() for line in oninit.splitlines()]
    assert "Target amd64-unicode" in script  # a 64-bit installer: System32 is the 64-bit one
    assert "X64FSRedirection" not in script
    # required: the user chooses (Yes continues, No cancels); silent (/S) continues
    box = next(i for i, x in enumerate(lines) if x.startswith("MessageBox") and "$MissingReq" in x)
    assert lines[box].startswith("MessageBox MB_YESNO|")
    assert lines[box].endswith("/SD IDYES IDYES required_ok") and lines[box + 1] == "Abort"
    # optional: information only
    info = next(i for i, x in enumerate(lines) if x.startswith("MessageBox") and "$MissingOpt" in x)
    assert "MB_ICONINFORMATION" in lines[info] and lines[info + 1] != "Abort"
    # what was missing is written beside the installed files, for a silent install
    install = "\n".join(_section(script, "Install"))
    assert 'FileOpen $R8 "$INSTDIR\\demo-onnxruntime-setup.log" w' in install
    assert any("cudnn64_9.dll (Get cuDNN)" in note for note in result.notes)
    assert any("optional OpenCL.dll" in note for note in result.notes)


@pytest.mark.usefixtures("no_makensis")
def test_an_add_on_installs_beside_the_main_product_found_by_its_uninstall_key(
    tmp_path: Path,
) -> None:
    settings = replace(SETTINGS, package_name="demo-cuda-onnxruntime")
    package, out = _layout(
        tmp_path,
        settings=settings,
        addon_of=Addon(name="demo", package_name="demo-main", version="1.0"),
    )
    NsisChannel().generate(package, out)
    script = _script(out)
    uninstall_root = "Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\"
    oninit = script.split("Function .onInit\n", 1)[1].split("FunctionEnd", 1)[0]
    assert f'ReadRegStr $R0 HKLM "{uninstall_root}demo-main" "InstallLocation"' in oninit
    assert "StrCpy $INSTDIR $R0" in oninit
    refusal = next(x for x in oninit.splitlines() if "which is not installed" in x).strip()
    assert refusal.startswith("MessageBox MB_OK|MB_ICONSTOP")
    assert "an add-on for demo, which is not installed" in refusal
    assert "Page directory" not in script and "InstallDirRegKey" not in script
    install = _section(script, "Install")
    assert 'WriteUninstaller "$INSTDIR\\uninstall-demo-cuda-onnxruntime.exe"' in install
    assert (
        f'WriteRegStr HKLM "{uninstall_root}demo-cuda-onnxruntime" "InstallLocation" "$INSTDIR"'
        in (install)
    )
    outpaths = [line.removeprefix("SetOutPath ") for line in install if line.startswith("SetOut")]
    # runtimes beside the main product's; NOTICE, licences (and a stray index) its own
    assert '"$INSTDIR\\runtimes\\openvino"' in outpaths
    assert '"$INSTDIR\\addons\\demo-cuda-onnxruntime"' in outpaths
    assert '"$INSTDIR\\addons\\demo-cuda-onnxruntime\\licenses\\onnxruntime"' in outpaths
    assert '"$INSTDIR\\licenses\\onnxruntime"' not in outpaths
    deletes = [line for line in _section(script, "Uninstall") if line.startswith("Delete ")]
    assert 'Delete "$INSTDIR\\addons\\demo-cuda-onnxruntime\\NOTICE"' in deletes
    assert 'Delete "$INSTDIR\\NOTICE"' not in deletes  # the main product's stays
    assert 'Delete "$INSTDIR\\uninstall.exe"' not in deletes


@pytest.mark.usefixtures("no_makensis")
def test_no_redist_no_check(tmp_path: Path) -> None:
    system = ExternalLibrary("KERNEL32.dll", "windows", "system", "", ("x.dll",))
    package, out = _layout(tmp_path, externals=(system,))
    result = NsisChannel().generate(package, out)
    script = _script(out)
    oninit = script.split("Function .onInit", 1)[1].split("FunctionEnd", 1)[0]
    assert "IfFileExists" not in oninit and "SearchPath" not in oninit
    assert "MessageBox" in oninit  # the x64 check only
    assert len(result.notes) == 1


@pytest.mark.usefixtures("no_makensis")
def test_injected_strings_are_escaped_in_the_script(tmp_path: Path) -> None:
    package, out = _layout(tmp_path, **INJECTED)
    package = replace(package, settings=INJECTED_SETTINGS)
    NsisChannel().generate(package, out)
    lines = _script(out).splitlines()
    verbatim = {
        "ProductName": package.product,
        "ProductVersion": package.version,
        "CompanyName": package.settings.publisher,
        "FileDescription": package.description,
        "Comments": package.url,
    }
    for key, value in verbatim.items():
        assert f"VIAddVersionKey {key} {nsis_string(value, expand=False)}" in lines
    assert f"Name {nsis_string(f'{package.product} {package.version}')}" in lines
    name = package.settings.package_name
    assert f"InstallDir {nsis_string(name, prefix='$PROGRAMFILES64' + chr(92))}" in lines
    assert "VIProductVersion 1.2.3.0" in lines
    assert 'OutFile "Pro_duct___NSISDIR___q_-1.2.3-rc.1+_INSTDIR___-setup.exe"' in lines
    # no user text outside a quoted token: each line has balanced unescaped quotes
    for line in lines:
        if line.lstrip().startswith(";"):
            continue
        assert re.sub(r"\$\\[\"'`]", "", line).count('"') % 2 == 0, line


@pytest.mark.usefixtures("no_makensis")
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"description": "bell\x07"}, "description"),
        ({"product": "demo $\\"}, "product"),
        ({"version": "1" * 1100}, "version"),
    ],
)
def test_unwritable_strings_are_config_errors(
    tmp_path: Path, overrides: dict[str, str], field: str
) -> None:
    package, out = _layout(tmp_path, **overrides)
    with pytest.raises(ConfigError, match=field):
        NsisChannel().generate(package, out)
    assert not (out / "installer.nsi").exists()


@pytest.mark.parametrize(
    "package_name", ["", "a\\b", "a/b", "CON", "nul.txt", "dot.", "tab\tname", 'q"']
)
def test_package_name_must_be_a_windows_directory_name(tmp_path: Path, package_name: str) -> None:
    package, out = _layout(tmp_path)
    package = replace(package, settings=replace(SETTINGS, package_name=package_name))
    with pytest.raises(ConfigError, match="package_name"):
        NsisChannel().generate(package, out)


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("runtimes/a$b.dll", "'\\$'"),
        ("runtimes/con.dll", "reserved"),
        ("runtimes/a:b.dll", "forbids"),
        ("runtimes/x./a.dll", "dot"),
        ("../escape.dll", "dot name"),
        ("runtimes//a.dll", "normalised"),
        ("Runtimes/openvino/x.dll", "case-insensitive"),
        ("UNINSTALL.EXE", "uninstaller"),
        ("uninstall.exe", "uninstaller"),
    ],
)
def test_stage_paths_windows_cannot_hold_are_refused(
    tmp_path: Path, path: str, problem: str
) -> None:
    package, out = _layout(tmp_path)
    extra = ShippedFile(path, 1, "0" * 64, 0o644)
    package = replace(package, files=(*package.files, extra))
    with pytest.raises(ConfigError, match=problem):
        NsisChannel().generate(package, out)


def test_symlinks_are_refused(tmp_path: Path) -> None:
    package, out = _layout(tmp_path)
    real = package.files[0]
    link = ShippedFile("runtimes/openvino/link.dll", real.size, real.sha256, 0o777, real.path)
    with pytest.raises(ConfigError, match="symbolic link"):
        NsisChannel().generate(replace(package, files=(*package.files, link)), out)


def test_the_windows_on_arm_installer_is_x64_checks_for_arm64_and_says_so(tmp_path: Path) -> None:
    """NSIS has no Arm stub: an x64 program that requires a native ARM64 machine (x64.nsh's
    IsNativeARM64) before anything else, named for arm64, installing to the native Program
    Files like the x64 one."""
    base = tmp_path / "dist" / "demo" / "1.0.0"
    package = make_package_input(base, "windows-arm64")
    out = base / "packaging" / "nsis" / "windows-arm64"
    NsisChannel().generate(package, out)
    lines = _script(out).splitlines()
    for line in (
        "Target amd64-unicode",
        'InstallDir "$PROGRAMFILES64\\demo-onnxruntime"',
        'OutFile "demo-1.0.0-arm64-setup.exe"',
        "  ${IfNot} ${IsNativeARM64}",
    ):
        assert line in lines
    assert "${RunningX64}" not in _script(out)
    init = lines[lines.index("Function .onInit") :]
    check = init.index("  ${IfNot} ${IsNativeARM64}")
    assert init[check + 2 : check + 4] == ["    Abort", "  ${EndIf}"]  # before anything else
    assert "needs Windows on Arm (ARM64)" in init[check + 1]
    sources = [line.strip() for line in lines if line.strip().startswith("File ")]
    assert sources and all(s.startswith('File "..\\..\\..\\windows-arm64\\') for s in sources)
    # the x64 installer's lifecycle: the required libraries checked, upgrade, uninstall
    assert '  SearchPath $R9 "MSVCP140.dll"' in lines
    assert "  Call RemovePrevious" in lines and 'Section "Uninstall"' in lines


def test_wrong_target_is_refused(tmp_path: Path) -> None:
    package = make_package_input(tmp_path, "linux-x86_64")
    with pytest.raises(ConfigError, match="windows-x86_64"):
        NsisChannel().generate(package, tmp_path / "out")


@pytest.mark.parametrize("tamper", ["same-size edit", "appended", "vanished", "now a symlink"])
def test_tampered_stage_is_an_integrity_error_and_nothing_is_built(
    tmp_path: Path, tamper: str
) -> None:
    package, out = _layout(tmp_path)
    victim = package.stage / "runtimes/openvino/onnxruntime.dll"
    data = victim.read_bytes()
    if tamper == "same-size edit":
        victim.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    elif tamper == "appended":
        victim.write_bytes(data + b"\0")
    elif tamper == "vanished":
        victim.unlink()
    else:
        victim.unlink()
        victim.symlink_to("openvino.dll")
    with pytest.raises(IntegrityError, match="changed or vanished") as caught:
        NsisChannel().generate(package, out)
    assert caught.value.file == str(victim)
    assert not list(out.glob("*.exe"))


def _fake_makensis(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir()
    tool = bin_dir / "makensis"
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)


def test_makensis_failure_names_the_script_and_shows_its_last_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    _fake_makensis(
        bin_dir,
        'if [ "$1" = -VERSION ]; then echo v3.99; exit 0; fi\n'
        "echo partial > demo-1.0.0-setup.exe\n"
        'i=0; while [ $i -lt 40 ]; do echo "noise $i"; i=$((i+1)); done\n'
        'echo "env SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH"\n'
        'echo "Error: boom in $*" >&2\n'
        "exit 1",
    )
    monkeypatch.setenv("PATH", str(bin_dir))
    package, out = _layout(tmp_path)
    with pytest.raises(PackagingError) as caught:
        NsisChannel().generate(package, out)
    message = str(caught.value)
    assert "installer.nsi" in message
    assert "Error: boom in -WX -V4 -NOCONFIG -INPUTCHARSET UTF8 installer.nsi" in message
    assert f"env SOURCE_DATE_EPOCH={package.source_date_epoch}" in message
    assert "noise 39" in message and "noise 5\n" not in message  # only the tail
    assert caught.value.file == str(out / "installer.nsi")
    assert not list(out.glob("*.exe"))  # a partial output is removed


def test_nsis_2_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    _fake_makensis(bin_dir, "echo v2.46; exit 0")
    monkeypatch.setenv("PATH", str(bin_dir))
    package, out = _layout(tmp_path)
    with pytest.raises(PackagingError, match="not NSIS 3"):
        NsisChannel().generate(package, out)


# --- real makensis and 7z ---------------------------------------------------------------------


@pytest.mark.tools
@requires_makensis
def test_compiles_with_warnings_as_errors(compiled: tuple[PackageInput, Path]) -> None:
    _, exe = compiled
    assert exe.read_bytes()[:2] == b"MZ"
    machine = pefile.PE(str(exe), fast_load=True).FILE_HEADER.Machine
    assert machine == pefile.MACHINE_TYPE["IMAGE_FILE_MACHINE_AMD64"]  # runs on plain 64-bit Wine
    info = _version_info(exe)
    assert info["ProductName"] == "demo"
    assert info["CompanyName"] == "Demo Org"
    assert info["FileVersion"] == "1.0.0"
    assert info["OriginalFilename"] == exe.name


@pytest.mark.tools
@requires_makensis
@requires_7z
def test_7z_lists_exactly_the_stage_files(compiled: tuple[PackageInput, Path]) -> None:
    package, exe = compiled
    entries = _7z_entries(exe)
    # 7-Zip shows payload paths relative to $INSTDIR and the uninstaller NSIS writes itself; a
    # 64-bit installer knows it runs on x64 at compile time, so no plug-in ($PLUGINSDIR) is needed
    plugins = [e["Path"] for e in entries if e["Path"].startswith("$PLUGINSDIR/")]
    assert plugins == []
    paths = sorted(e["Path"] for e in entries if e["Path"] not in plugins)
    assert paths == sorted([f.path for f in package.files] + ["uninstall.exe"])
    sizes = {e["Path"]: e["Size"] for e in entries}
    assert all(sizes[f.path] == str(f.size) for f in package.files)
    assert all(e.get("Modified", "") == "" for e in entries)  # SetDateSave off


@pytest.mark.tools
@requires_makensis
@requires_7z
def test_7z_extracts_the_stage_byte_for_byte(
    compiled: tuple[PackageInput, Path], tmp_path: Path
) -> None:
    package, exe = compiled
    subprocess.run(
        ["7z", "x", "-y", f"-o{tmp_path / 'x'}", str(exe)], capture_output=True, check=True
    )
    extracted = {
        p.relative_to(tmp_path / "x").as_posix(): _sha256(p)
        for p in (tmp_path / "x").rglob("*")
        if p.is_file()
    }
    assert extracted.pop("uninstall.exe")
    assert extracted == {f.path: f.sha256 for f in package.files}


@pytest.mark.tools
@requires_makensis
def test_two_compiles_are_byte_identical(tmp_path: Path) -> None:
    first, out1 = _layout(tmp_path / "one")
    second, out2 = _layout(tmp_path / "elsewhere" / "two")
    for f in second.files:  # other mtimes, other absolute paths: same bytes
        os.utime(second.stage / f.path, (1, 1))
    NsisChannel().generate(first, out1)
    NsisChannel().generate(second, out2)
    exe = "demo-1.0.0-setup.exe"
    assert (out1 / exe).read_bytes() == (out2 / exe).read_bytes()
    assert _script(out1) == _script(out2)


@pytest.mark.tools
@requires_makensis
def test_injected_strings_compile_and_come_out_literally(tmp_path: Path) -> None:
    package, out = _layout(tmp_path, **INJECTED)
    # a release's solid LZMA: the header is read back below
    package = replace(package, settings=INJECTED_SETTINGS, release=True)
    result = NsisChannel().generate(package, out)  # -WX: an unknown $variable would fail it
    exe = next(p for p in result.files if p.suffix == ".exe")
    info = _version_info(exe)
    assert info["ProductName"] == package.product
    assert info["ProductVersion"] == package.version
    assert info["CompanyName"] == package.settings.publisher
    assert info["FileDescription"] == package.description
    assert info["Comments"] == package.url
    # run-time strings: the compiled header holds them as plain text, no variable codes
    header = _nsis_header(exe.read_bytes())
    for text in (
        f"{package.product} {package.version}",  # Name
        package.product,  # DisplayName
        package.version,
        package.settings.publisher,
        package.url,
        "Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\" + package.settings.package_name,
        "\\" + package.settings.package_name,  # InstallDir, after $PROGRAMFILES64
    ):
        assert text.encode("utf-16-le") in header, text
