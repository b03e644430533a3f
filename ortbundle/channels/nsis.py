"""NSIS channel: an `installer.nsi` for a Windows stage, compiled when makensis is here.

windows-x86_64's installer is `<product>-<version>-setup.exe` in packaging/nsis/; Windows on
Arm's, `<product>-<version>-arm64-setup.exe` in packaging/nsis/windows-arm64/. NSIS has no
native Arm stub here, so both are x64 programs: Windows on Arm runs the arm64 one under its x64
emulation, where it checks `IsNativeARM64` (x64.nsh) and installs the native arm64 runtimes to
the native Program Files ($PROGRAMFILES64: x64 and ARM64 share it and the 64-bit registry view);
on an x64 machine it refuses in .onInit — a message, a non-zero exit, nothing written.

Files written into `out` (`dist/<product>/<version>/packaging/nsis/`):

- `installer.nsi` — UTF-8 with a BOM, so makensis on Windows reads it right even without
  `-INPUTCHARSET`. It installs every file of `package.files` (and nothing else) to
  `$PROGRAMFILES64\\<settings.package_name>` — the package name rather than the product, because
  it is also the Add/Remove Programs key and must stay a plain directory name — keeping the
  stage's layout (`runtimes\\openvino\\…`, `licenses\\…`, NOTICE, runtimes.json and
  runtime_loader.py at the root). Payload paths are relative to the script's directory (makensis
  resolves `File` sources against it), so the script holds no host path and compiles anywhere
  the stage sits next to it as the build lays it out.

  The installer is a 64-bit program (`Target amd64-unicode`; the product is x64-only) and
  installs per machine. Before installing it runs the installed version's own uninstaller in
  place (upgrade, downgrade or reinstall alike: one uninstall entry, no file a newer version
  dropped left behind), and installs where that version was. The uninstaller first checks that
  no DLL it would remove is in use (opened for writing: Windows refuses that for a loaded
  image); if one is, it removes nothing and exits 3, and so does an upgrade. tests/
  test_windows_installer.py and tests/test_smoke_real.py run all of this under Wine.
- `<product>-<version>-setup.exe` — only if `makensis` is on PATH (otherwise a note says how to
  get it). Characters other than `A-Za-z0-9._+-` in product or version become `_` in this name.

Escaping. A script line passes three NSIS stages: a preprocessor (`${define}`, `$%ENV%` and
`$\\r $\\n $\\t`, applied even right after `$$`), the tokenizer (`$\\"`, `$\\'` and `` $\\` ``
become quotes anywhere in a token) and, for run-time strings only, variable expansion (`$$` is
`$`, `$NAME`/`$(lang)` are looked up). `nsis_string` produces a double-quoted token that
survives all three: quotes become `$\\q`, tab/CR/LF become `$\\t $\\r $\\n`, `$` becomes `$$` —
and a `{`, `%` or `\\` right after it is written `${U+7B}`, `${U+25}`, `${U+5C}` so the
preprocessor cannot see a define, an environment variable or an escape. Strings NSIS stores as
written (VersionInfo, File sources) get `${U+24}` for each `$` instead. Two things cannot be
written at all and are refused: other control characters, and a value ending in `$\\` (the
tokenizer would read its closing quote as `$\\"`).

A `ShippedFile` with `link_to` is refused: NSIS cannot create symbolic links, and installing a
copy would silently diverge from the stage the file list describes (a Windows stage has none).

Reproducibility: `SetDateSave off` keeps stage mtimes out of the payload, makensis runs with
`-NOCONFIG` (a host nsisconf.nsh could add anything) and SOURCE_DATE_EPOCH, and the PE header's
TimeDateStamp is the one of makensis's own exehead stub, not the compile time. Two compiles with
the same makensis build give the same bytes; a different NSIS build gives different (but again
stable) bytes.

Signing (channels/authenticode.py): with an Authenticode identity in the environment, makensis
is given `-DORTBUNDLE_SIGN=<this interpreter> -m ortbundle.channels.authenticode`, and the
script's `!uninstfinalize` signs the uninstaller before it is packed into the installer,
`!finalize` the installer itself (NSIS 3.08 or newer). Only these two files are signed: the
staged DLLs are packed as they are, their vendors' signatures intact. The script is the same
either way; a signed installer is then read back (signify) and its signer recorded. Without
an identity the installer is unsigned, which the build says once.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import unicodedata
from collections import deque
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import IO, Any

from ortbundle._core.errors import ConfigError, PackagingError
from ortbundle._core.oserrors import tool_ran_out
from ortbundle._core.progress import mib, status
from ortbundle._core.templating import render
from ortbundle._core.words import plural
from ortbundle.channels import CHANNEL_TARGETS, ChannelOutput, PackageInput, check_staged
from ortbundle.channels.authenticode import (
    AuthenticodeIdentity,
    authenticode_identity,
    finalize_command,
    package_root,
    signed_by,
)
from ortbundle.channels.output_cache import input_key, memoized
from ortbundle.channels.packagers import compression
from ortbundle.config.targets import get_target
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.binaries.baseline import version_key, windows_name
from ortbundle.stage.requirements import requirement_groups

__all__ = ["NsisChannel", "nsis_string"]

SCRIPT_NAME = "installer.nsi"
UNINSTALLER = "uninstall.exe"
_COMPONENT = "nsis"
_TEMPLATE = "installer.nsi.j2"
_UNINSTALL_ROOT = "Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\"
_MAX_STRLEN = 1023  # NSIS_MAX_STRLEN (1024) minus the terminator: run-time buffers are that big
_CHUNK = 1 << 20
_TAIL_LINES = 25

_QUOTES = frozenset("\"'`")
_CONTROL = {"\t": "$\\t", "\n": "$\\n", "\r": "$\\r"}
# After a `$`, these would start a define, an environment variable or an escape in the
# preprocessor, which does not skip `$$`; ${U+XXXX} writes the character without that meaning.
_AFTER_DOLLAR = {"{": "${U+7B}", "%": "${U+25}", "\\": "${U+5C}"}
_REFUSED_CATEGORIES = frozenset({"Cc", "Cs"})  # control characters, lone surrogates

_WINDOWS_FORBIDDEN = frozenset('<>:"/\\|?*')
_WINDOWS_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL"] + [f"COM{i}" for i in range(10)] + [f"LPT{i}" for i in range(10)]
)
_DLL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_FILE_WORD = re.compile(r"[^A-Za-z0-9._+-]")
_VERSION_HEAD = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_MAKENSIS_VERSION = re.compile(r"v?(\d+)\.(\d+)")


def nsis_string(value: str, *, expand: bool = True, prefix: str = "") -> str:
    """Quote `value` as one NSIS token whose final text is exactly `value`.

    `expand=True` for strings NSIS expands at run time (most arguments: Name, registry values,
    messages, paths); `expand=False` for ones it keeps as written (VIAddVersionKey, File,
    OutFile). `prefix` is trusted NSIS text put inside the quotes first (`$INSTDIR\\`).
    Raises ValueError for what NSIS cannot carry (see the module docstring).
    """
    if prefix.endswith(("$", "$\\")):
        raise ValueError("an NSIS prefix must not end in '$' or '$\\'")
    if len(value) > _MAX_STRLEN:
        raise ValueError(f"longer than NSIS's {_MAX_STRLEN} characters")
    if value.endswith("$\\"):
        raise ValueError("ends in '$\\', which NSIS cannot quote")
    out = ['"', prefix]
    after_dollar = False
    for ch in value:
        if ch == "$":
            out.append("$$" if expand else "${U+24}")
            after_dollar = expand
            continue
        if after_dollar and ch in _AFTER_DOLLAR:
            out.append(_AFTER_DOLLAR[ch])
        elif ch in _QUOTES:
            out.append("$\\" + ch)
        elif ch in _CONTROL:
            out.append(_CONTROL[ch])
        elif unicodedata.category(ch) in _REFUSED_CATEGORIES:
            raise ValueError(f"holds the control character U+{ord(ch):04X}")
        else:
            out.append(ch)
        after_dollar = False
    out.append('"')
    return "".join(out)


# What the installer requires of the machine, by what the target's packages call it
# (data/targets.toml package_arch.nsis): x64.nsh's test, the file name's tag, and what the
# refusal says the installer is for.
_MACHINES = {
    "x64": {"test": "${RunningX64}", "tag": "", "needs": "64-bit (x64) Windows"},
    "arm64": {
        "test": "${IsNativeARM64}",
        "tag": "-arm64",
        "needs": "Windows on Arm (ARM64): its runtimes are native ARM64 code, which this "
        "computer cannot load. Nothing was installed",
    },
}


class NsisChannel:
    """The Windows installer: installer.nsi, and the setup .exe when makensis is available."""

    name = "nsis"
    target = CHANNEL_TARGETS["nsis"][0]  # one of several: generate() takes any of them

    def generate(self, package: PackageInput, out: Path) -> ChannelOutput:
        """Check the stage, write installer.nsi, and compile it if makensis is on PATH."""
        machine = get_target(package.target).arch_for(self.name)
        if package.target not in CHANNEL_TARGETS[self.name] or machine not in _MACHINES:
            raise ConfigError(
                f"the NSIS channel packages the {' or '.join(CHANNEL_TARGETS[self.name])} "
                f"stage, not {package.target}",
                component=_COMPONENT,
                target=package.target,
            )
        out.mkdir(parents=True, exist_ok=True)
        context = _context(package, out)
        script = out / SCRIPT_NAME
        text = render(_TEMPLATE, context, _FILTERS, memo=package.memo, overrides=package.templates)
        script.write_bytes(text.encode("utf-8-sig"))

        exe_name: str = context["outfile"]
        makensis = shutil.which("makensis")
        if makensis is None:
            _verify_stage(package)
            notes = (
                f"{SCRIPT_NAME} was not compiled: makensis is not on PATH. Install NSIS 3 "
                "(Debian/Ubuntu: apt-get install nsis), then run "
                f"`makensis -WX -V2 -NOCONFIG -INPUTCHARSET UTF8 {SCRIPT_NAME}` in this "
                f"directory with SOURCE_DATE_EPOCH={package.source_date_epoch} to get {exe_name}",
            )
            return ChannelOutput(
                self.name,
                out,
                (script,),
                notes + _requirement_notes(package) + _system_notes(package),
            )
        version = _makensis_version(makensis, package)
        identity = authenticode_identity(os.environ)
        if identity is not None:
            _check_finalize(makensis, version, package)
        exe = out / exe_name
        signing = identity.memo_key if identity else "unsigned"
        key = input_key(package, "nsis-installer", [text, version, exe_name, signing])

        def compile_checked(_: Path) -> None:
            _verify_stage(package)  # only what makensis is about to read; a memo hit reads none
            _compile(makensis, package, out, exe_name, identity)

        exe_sha256 = memoized(package, "nsis-installer", key, exe, compile_checked)
        signers = {}
        how = "unsigned"
        if identity is not None:
            signature = signed_by(exe, identity)
            signers[exe.name] = {
                "subject": signature.subject,
                "sha256": signature.sha256,
            }
            how = f"Authenticode-signed by {signature.subject}" + (
                ""
                if signature.timestamped
                else " (not timestamped: it expires with the certificate)"
            )
        notes = (
            f"{exe_name}: {plural(len(package.files), 'file')}, "
            f"{context['estimated_kib']} KiB installed, "
            f"built with makensis {version}; {how}",
        )
        return ChannelOutput(
            self.name,
            out,
            tuple(sorted((script, exe))),
            notes + _requirement_notes(package) + _system_notes(package),
            {exe.name: exe_sha256},
            signers,
        )


def _compile(
    makensis: str,
    package: PackageInput,
    out: Path,
    exe_name: str,
    identity: AuthenticodeIdentity | None = None,
) -> None:
    """Run makensis on the written script (signing through it when there is an identity).
    Failure leaves no .exe."""
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(package.source_date_epoch))
    # -V4: makensis names each file as it compresses it, which the live status shows
    command = [makensis, "-WX", "-V4", "-NOCONFIG", "-INPUTCHARSET", "UTF8"]
    if identity is not None:
        command.append(f"-DORTBUNDLE_SIGN={finalize_command()}")
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root(), env.get("PYTHONPATH", "")) if p
        )
    command.append(SCRIPT_NAME)
    exe = out / exe_name
    try:
        with subprocess.Popen(
            command, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        ) as running:
            assert running.stdout is not None
            tail = _watch(running.stdout, sum(f.size for f in package.files))
            returncode = running.wait()
    except OSError as exc:
        exe.unlink(missing_ok=True)
        raise PackagingError(
            f"could not run makensis: {exc}",
            component=_COMPONENT,
            target=package.target,
            file=str(out / SCRIPT_NAME),
        ) from exc
    if returncode != 0 or not exe.is_file():
        exe.unlink(missing_ok=True)
        if full := tool_ran_out("makensis", out, "the installer"):
            raise full
        last = "\n".join(tail) or "(no output)"
        raise PackagingError(
            f"makensis failed on {SCRIPT_NAME} (exit {returncode}); last output:\n{last}",
            component=_COMPONENT,
            target=package.target,
            file=str(out / SCRIPT_NAME),
            fix="a warning fails the build too (-WX); fix the script's inputs, or report it",
        )


_FILE_LINE = re.compile(r'File: "(?P<name>[^"]*)" (?P<size>\d+) bytes')


def _watch(output: IO[bytes], total: int) -> list[str]:
    """makensis's output, line by line: each file it compresses goes to the live status (name
    and bytes so far); the last lines are kept for an error message."""
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    done = 0
    for raw in output:
        line = raw.decode("utf-8", errors="replace").rstrip()
        if match := _FILE_LINE.search(line):
            done += int(match["size"])
            status(f"makensis {match['name']}: {mib(done)} of {mib(total)}")
        if line.strip():
            tail.append(line)
    return list(tail)


def _makensis_version(makensis: str, package: PackageInput) -> str:
    """NSIS 3 is needed (Unicode true, ${U+…}, $\\t); 2.x would fail with a confusing message."""
    try:
        result = subprocess.run(
            [makensis, "-VERSION"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
        )
    except OSError as exc:
        raise PackagingError(
            f"could not run makensis: {exc}", component=_COMPONENT, target=package.target
        ) from exc
    version = result.stdout.decode("utf-8", errors="replace").strip()
    match = _MAKENSIS_VERSION.match(version)
    if match is None or int(match.group(1)) < 3:
        raise PackagingError(
            f"makensis {version or '(no version)'} is not NSIS 3",
            component=_COMPONENT,
            target=package.target,
            fix="install NSIS 3 or newer (Debian/Ubuntu: apt-get install nsis)",
        )
    return version


def _check_finalize(makensis: str, version: str, package: PackageInput) -> None:
    """!uninstfinalize (the signed uninstaller) came with NSIS 3.08."""
    match = _MAKENSIS_VERSION.match(version)
    if match is None or (int(match.group(1)), int(match.group(2))) < (3, 8):
        raise PackagingError(
            f"makensis {version} cannot sign the uninstaller inside the build "
            "(!uninstfinalize needs NSIS 3.08)",
            component=_COMPONENT,
            target=package.target,
            fix=f"install NSIS 3.08 or newer ({makensis} is older)",
        )


_COMPRESSOR = re.compile(r"(/SOLID )?(/FINAL )?(zlib|bzip2|lzma)")


def _compressor(release: bool) -> dict[str, Any]:
    """SetCompressor's argument (and LZMA's dictionary in MiB, if set) for this kind of build:
    a release the smallest installer, a development build a faster one (the summary says so)."""
    settings = compression("nsis", release)
    compressor = settings.get("compressor", "/SOLID lzma")
    dictionary = settings.get("dictionary_mib")
    if not isinstance(compressor, str) or not _COMPRESSOR.fullmatch(compressor):
        raise ConfigError(
            f"nsis compressor {compressor!r} is not one makensis knows",
            file="ortbundle/data/packagers.toml",
        )
    if dictionary is not None and (not isinstance(dictionary, int) or not 1 <= dictionary <= 1024):
        raise ConfigError(
            "nsis dictionary_mib must be a whole number of MiB, 1 to 1024",
            file="ortbundle/data/packagers.toml",
        )
    return {"command": compressor, "dictionary_mib": dictionary}


def _verify_stage(package: PackageInput) -> None:
    """Each listed file must still be the regular file of that size and SHA-256 the build staged."""
    for shipped in package.files:
        check_staged(package, shipped, _COMPONENT)


def _context(package: PackageInput, out: Path) -> dict[str, Any]:
    """Everything the template needs, each value checked so that rendering cannot fail."""
    settings = package.settings
    _check_windows_name(package, settings.package_name, "packaging.package_name")
    relative = _stage_from(package, out)
    uninstaller = _uninstaller(package)
    installed = {
        path: _installed_as(package, path)
        for path in map(lambda f: _checked_path(package, f), package.files)
    }
    paths = list(installed.values())
    _check_collisions(package, paths, uninstaller)

    groups: dict[str, list[str]] = {}
    for source, path in installed.items():
        parent = str(path.parent)
        groups.setdefault("" if parent == "." else parent, []).append(_win(source))
    directories = [
        {
            "path": _win(PurePosixPath(parent)) if parent else "",
            "sources": [f"{relative}\\{p}" for p in sorted(groups[parent])],
        }
        for parent in sorted(groups)
    ]
    all_dirs = {str(p) for path in paths for p in path.parents if str(p) != "."}
    uninstall_dirs = sorted(all_dirs, key=lambda d: (-d.count("/"), d))

    requirements = _requirements(package)
    licenses = ", ".join(package.licenses)
    display_name = f"{package.product} {package.version}"
    machine = _MACHINES[get_target(package.target).arch_for("nsis") or "x64"]
    outfile = f"{_file_word(package.product)}-{_file_word(package.version)}{machine['tag']}"
    context: dict[str, Any] = {
        "display_name": display_name,
        "target": package.target,  # a target name: [a-z0-9-] only
        "product": package.product,
        "version": package.version,
        "publisher": settings.publisher,
        "description": package.description,
        "url": package.url,
        "copyright": (
            f"{settings.publisher}; components under {licenses} (see NOTICE)"
            if licenses
            else settings.publisher
        ),
        "package_name": settings.package_name,
        "outfile": f"{outfile}-setup.exe",
        "vi_version": _version_quad(package.version),
        "uninstall_key": _UNINSTALL_ROOT + settings.package_name,
        "uninstaller": uninstaller,
        "addon": _addon(package, display_name),
        "estimated_kib": (sum(f.size for f in package.files) + 1023) // 1024,
        # data/packagers.toml's, for this kind of build: constant words, never copied input
        "compressor": _compressor(package.release),
        "directories": directories,
        "uninstall_files": [_win(p) for p in paths],
        "uninstall_dirs": [_win(PurePosixPath(d)) for d in uninstall_dirs],
        "required": [r for r in requirements if not r["optional"]],
        "optional": [r for r in requirements if r["optional"]],
        "log_name": _log_name(package),
        "machine_test": machine["test"],
        "machine_message": f"{display_name} needs {machine['needs']}.",
        "required_intro": (
            f"{display_name} needs these libraries, which Windows cannot find on this computer "
            "(not in System32 nor on the DLL search path):"
        ),
        "required_outro": (
            "Install them, or the runtimes that need them will not work. Continue the "
            "installation anyway?"
        ),
        "optional_intro": (
            f"{display_name} will work, but these optional libraries are missing on this computer:"
        ),
        "min_windows": _min_windows(package, display_name),
        **_lifecycle_context(display_name, paths),
    }
    for field in (
        "product",
        "version",
        "publisher",
        "description",
        "url",
        "copyright",
        "package_name",
        "display_name",
        "uninstall_key",
        "machine_message",
        "required_intro",
        "required_outro",
        "optional_intro",
        "log_name",
        "per_machine_text",
        "upgrade_detail",
        "upgrade_failed",
        "in_use_message",
    ):
        _check_text(package, field, context[field])
    for requirement in requirements:
        _check_text(package, f"external group {requirement['group']}", requirement["line"])
    return context


# WinVer.nsh's ${AtLeastWin<suffix>} tests, by the NT version baselines.toml speaks
_WINVER_TESTS = {"6.0": "Vista", "6.1": "7", "6.2": "8", "6.3": "8.1", "10.0": "10"}


def _min_windows(package: PackageInput, display_name: str) -> dict[str, str] | None:
    """The oldest Windows the installer accepts: the package's, as the requirements model
    resolved it (what the DLLs need, raised to the product's `[system] windows`)."""
    needed = package.system.windows
    if needed is None:
        return None
    version = needed.version
    # the newest test WinVer.nsh has that is not newer than `version`
    known = [v for v in _WINVER_TESTS if version_key(v) <= version_key(version)]
    if not known:
        return None
    test = _WINVER_TESTS[max(known, key=version_key)]
    message = f"{display_name} needs {windows_name(version)} or newer ({needed.why})."
    _check_text(package, "minimum Windows message", message)
    return {"test": f"${{AtLeastWin{test}}}", "message": message, "version": version}


def _lifecycle_context(display_name: str, paths: list[PurePosixPath]) -> dict[str, Any]:
    """Texts and lists for the per-machine, upgrade and files-in-use blocks of the script."""
    return {
        "per_machine_text": (
            f"{display_name} is installed per machine: one copy for every user of this "
            "computer, registered for all users. A version already installed is removed first."
        ),
        "upgrade_detail": "removing the installed version with its own uninstaller",
        "upgrade_failed": (
            "the installed version could not be removed (a program may be using its files). "
            f"Nothing was changed. Close every program that uses {display_name}, then run "
            "this setup again."
        ),
        # Only libraries: a running program holds its DLLs open, not its texts or index.
        "in_use_checks": [_win(p) for p in paths if p.suffix.casefold() == ".dll"],
        "in_use_message": (
            f"Files of {display_name} are in use. Nothing was removed. Close every program "
            "that uses them, then run the uninstaller again."
        ),
    }


# What an add-on installs beside the main product's files: its runtimes (where the main loader
# looks) and its index fragment. Everything else (NOTICE, licenses/) would overwrite, and on
# uninstall delete, the main product's own files of the same name: it goes under addons\\<name>.
_ADDON_BESIDE = ("runtimes", "runtimes.d")
_ADDON_DIR = "addons"


def _uninstaller(package: PackageInput) -> str:
    """uninstall.exe; an add-on's has its own name, beside the main product's."""
    if not package.addon_of:
        return UNINSTALLER
    return f"uninstall-{_file_word(package.settings.package_name)}.exe"  # bare in the script


def _installed_as(package: PackageInput, path: PurePosixPath) -> PurePosixPath:
    """Where a stage file goes under $INSTDIR (see _ADDON_BESIDE)."""
    if not package.addon_of or path.parts[0] in _ADDON_BESIDE:
        return path
    return PurePosixPath(_ADDON_DIR, package.settings.package_name, path)


def _addon(package: PackageInput, display_name: str) -> dict[str, str] | None:
    """An add-on installer's facts: the main product's uninstall key, and what it says when
    the main product is not installed."""
    if not package.addon_of:
        return None
    main_package = package.addon_of.package_name
    _check_windows_name(package, main_package, "the main product's package_name")
    context = {
        "main_key": _UNINSTALL_ROOT + main_package,
        "main_dir": main_package,
        "missing": (
            f"{display_name} is an add-on for {package.addon_of.name}, which is not installed "
            f"on this computer. Install {package.addon_of.name} first, then run this setup again."
        ),
        "detail": f"installing beside {package.addon_of.name} in ",
    }
    for field, value in context.items():
        _check_text(package, f"add-on {field}", value)
    return context


# Kinds the user's machine must provide and Windows may lack: the Visual C++ runtime, a vendor
# toolkit (CUDA, cuDNN), a GPU driver's DLLs. `system` DLLs ship with every Windows; `toolchain`
# is a Linux notion (libstdc++), never a DLL the installer could look for.
_CHECKED_KINDS = ("redist", "toolkit", "driver")


def _requirements(package: PackageInput) -> list[dict[str, Any]]:
    """The external DLLs the installer looks for, one entry per group of the requirements
    model: the names the closure found, the sentence that says what to install, the runtimes
    that need them, and whether the group is required, as every output says it."""
    groups: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for model in sorted(requirement_groups(package.externals), key=lambda g: g.group):
        if model.kind not in _CHECKED_KINDS:
            continue
        for external in model.libraries:
            if external.name.casefold() in seen:
                continue
            if not _DLL_NAME.fullmatch(external.name):
                raise ConfigError(
                    f"external library name {external.name!r} is not a plain DLL file name",
                    component=_COMPONENT,
                    target=package.target,
                    fix="name one DLL per entry in the [[externals]] group (no globs, no paths)",
                )
            seen.add(external.name.casefold())
            group = groups.setdefault(
                model.group,
                {
                    "group": model.group,
                    "names": [],
                    "what": model.install or model.note or model.group,
                    "version": model.version,
                    "users": {},
                    "optional": model.optional,
                },
            )
            group["names"].append(external.name)
            for user in external.needed_by:
                group["users"][_runtime_label(package, user)] = None
    found: list[dict[str, Any]] = []
    for group in groups.values():
        names = ", ".join(group["names"]) + (f" ({group['version']})" if group["version"] else "")
        users = ", ".join(group["users"])
        if group["optional"]:
            line = f"  {names} — {group['what']} (without it, {users} loses the rung it enables)"
        else:
            line = f"  {names} — {group['what']} (needed by {users})"
        found.append({**group, "line": line, "id": len(found) + 1})
    return found


def _runtime_label(package: PackageInput, user: str) -> str:
    """The runtime (its label) a staged path belongs to, else the path's top two parts."""
    for runtime in package.runtimes:
        if user.startswith(runtime.directory.rstrip("/") + "/"):
            return runtime.label
    return "/".join(PurePosixPath(user).parts[:2])


def _requirement_notes(package: PackageInput) -> tuple[str, ...]:
    requirements = _requirements(package)
    required = [r for r in requirements if not r["optional"]]
    optional = [r for r in requirements if r["optional"]]
    notes = []
    if required:
        names = "; ".join(f"{', '.join(r['names'])} ({r['what']})" for r in required)
        notes.append(
            f"the installer looks for {names} the way Windows finds DLLs (System32, the DLL "
            "search path); if one is missing it says what to install and asks whether to "
            f"continue, and a silent install (/S) continues and writes {_log_name(package)} "
            "in the installation directory"
        )
    if optional:
        names = "; ".join(f"{', '.join(r['names'])} ({r['what']})" for r in optional)
        notes.append(f"the installer mentions the optional {names} when missing")
    return tuple(notes)


def _log_name(package: PackageInput) -> str:
    return f"{package.settings.package_name}-setup.log"


def _system_notes(package: PackageInput) -> tuple[str, ...]:
    """The oldest Windows and Visual C++ runtime the DLLs need, as the build prints them."""
    return () if package.system.empty else (f"runs on {package.system.describe()}",)


def _stage_from(package: PackageInput, out: Path) -> str:
    """The stage as a Windows-style path relative to the script's directory."""
    stage, here = package.stage.resolve(), out.resolve()
    if here == stage or stage in here.parents:
        raise ConfigError(
            "the NSIS output directory is inside the stage it packages",
            component=_COMPONENT,
            target=package.target,
            file=str(out),
            fix="write packaging next to the stage (dist/<product>/<version>/packaging/nsis)",
        )
    try:
        relative = os.path.relpath(stage, here)
    except ValueError as exc:  # Windows: another drive
        raise ConfigError(
            f"the stage cannot be reached by a relative path from the NSIS directory: {exc}",
            component=_COMPONENT,
            target=package.target,
            file=str(package.stage),
        ) from exc
    relative = relative.replace(os.sep, "\\").replace("/", "\\")
    _check_text(package, "the stage's relative path", relative)
    return relative


def _checked_path(package: PackageInput, shipped: ShippedFile) -> PurePosixPath:
    """A stage path NSIS can carry: relative, Windows-valid components, no links, no `$`."""
    if shipped.link_to is not None:
        raise ConfigError(
            "NSIS cannot install a symbolic link",
            component=_COMPONENT,
            target=package.target,
            file=shipped.path,
            fix=f"a Windows stage holds no symlinks; rebuild the {package.target} stage",
        )
    path = PurePosixPath(shipped.path)
    if path.is_absolute() or not path.parts or str(path) != shipped.path:
        raise _bad_path(package, shipped.path, "is not a normalised relative path")
    for part in path.parts:
        _check_windows_name(package, part, "stage path", file=shipped.path)
        if "$" in part:
            # File takes its source verbatim while SetOutPath/Delete expand `$`: one name, two
            # escapings for the same path. No ONNX Runtime or OpenVINO file has a `$`.
            raise _bad_path(package, shipped.path, "contains '$'")
    _check_text(package, "stage path", _win(path), file=shipped.path)
    return path


def _check_collisions(
    package: PackageInput, paths: Iterable[PurePosixPath], uninstaller: str
) -> None:
    """Windows names are case-insensitive: no two entries may become one, nor the uninstaller."""
    seen: dict[str, str] = {}
    for path in paths:
        if str(path).casefold() == uninstaller.casefold():
            raise _bad_path(package, str(path), "is the name of the uninstaller NSIS writes")
        for entry in [*reversed(path.parents[:-1]), path]:
            key = str(entry).casefold()
            if seen.setdefault(key, str(entry)) != str(entry):
                raise _bad_path(
                    package, str(path), f"collides with {seen[key]!r} on a case-insensitive disk"
                )


def _check_windows_name(
    package: PackageInput, name: str, what: str, *, file: str | None = None
) -> None:
    problem = None
    if not name or name in {".", ".."}:
        problem = "is empty or a dot name"
    elif any(ch in _WINDOWS_FORBIDDEN or ord(ch) < 32 for ch in name):
        problem = 'contains a character Windows forbids in names (<>:"/\\|?* or control)'
    elif name[-1] in ". ":
        problem = "ends in a dot or a space"
    elif name.split(".")[0].rstrip(" ").upper() in _WINDOWS_RESERVED:
        problem = "is a reserved Windows device name"
    if problem:
        raise ConfigError(
            f"{what} {name!r} {problem}",
            component=_COMPONENT,
            target=package.target,
            file=file,
            fix="rename it to a valid Windows file name",
        )


def _check_text(package: PackageInput, field: str, value: str, *, file: str | None = None) -> None:
    try:
        nsis_string(value)
    except ValueError as exc:
        raise ConfigError(
            f"{field} cannot go into the NSIS script: it {exc}",
            component=_COMPONENT,
            target=package.target,
            file=file,
            fix="shorten it or drop the character",
        ) from None


def _bad_path(package: PackageInput, path: str, problem: str) -> ConfigError:
    return ConfigError(
        f"stage path {problem}",
        component=_COMPONENT,
        target=package.target,
        file=path,
        fix="rename the file in the recipe's keep/rename rules",
    )


def _version_quad(version: str) -> str:
    """VIProductVersion wants X.X.X.X of 16-bit numbers: the leading numeric release, padded.

    `v1.22.0rc1` → 1.22.0.0, `1!2.3` (PEP 440 epoch) → 2.3.0.0, `2025.0.0.17942` stays, parts
    over 65535 are clamped, and a version with no leading number gives 0.0.0.0.
    """
    text = version.strip().removeprefix("v").removeprefix("V")
    text = re.sub(r"^[0-9]+!", "", text)
    match = _VERSION_HEAD.match(text)
    parts = match.group().split(".")[:4] if match else []
    numbers = []
    for part in parts:
        digits = part.lstrip("0") or "0"
        numbers.append(0xFFFF if len(digits) > 5 else min(int(digits), 0xFFFF))
    numbers += [0] * (4 - len(numbers))
    return ".".join(str(n) for n in numbers)


def _file_word(text: str) -> str:
    return _FILE_WORD.sub("_", text) or "_"


def _win(path: PurePosixPath) -> str:
    return "\\".join(path.parts)


def _instdir(relative: str) -> str:
    return nsis_string(relative, prefix="$INSTDIR\\") if relative else '"$INSTDIR"'


def _verbatim(value: str) -> str:
    return nsis_string(value, expand=False)


_FILTERS = {"nsis": nsis_string, "nsis_verbatim": _verbatim, "instdir": _instdir}
