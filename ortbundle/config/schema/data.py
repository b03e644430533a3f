"""The schema of the tool's own data (ortbundle/data/*.toml): read as configuration, so held to
the same rules as a user's files."""

from __future__ import annotations

import re

from ortbundle.config.schema import choices as C
from ortbundle.config.schema.definitions import FileSchema, Key, Pattern, Table
from ortbundle.config.schema.shared import (
    ARCH_GROUP,
    GROUP_KEYS,
    LINUX_GROUP,
    WORD,
    table,
    tables,
    text,
    texts,
)

COMMIT = Pattern(re.compile(r"^[0-9a-f]{40}$"), "a full 40-hex commit SHA")
ACTION = Pattern(re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[A-Za-z0-9_./-]+)?$"), "owner/repo")

TARGET_DATA = Table(
    "[<target>]",
    "A target's platform facts.",
    (
        text("os", "the operating system", True, choices=C.OPERATING_SYSTEMS),
        text("format", "the binary format", True, choices=C.FORMATS),
        text("machine", "ELF e_machine name (pyelftools) or PE machine name", True),
        Key("bits", "integer", "ELF class / PE32 vs PE32+", default="64", minimum=32),
        text("abi", "Android: the jniLibs/<abi>/ directory"),
        text(
            "system_group",
            "the external group that is the operating system itself: what it provides opened "
            "by name is no undeclared load",
        ),
        Key(
            "page_align", "integer", "Android: the PT_LOAD alignment needed", default="0", minimum=0
        ),
        table(
            "package_arch",
            Table(
                "[<target>.package_arch]",
                "What each packaging format calls the target's machine.",
                tuple(
                    text(channel, f"the {channel} package's architecture name")
                    for channel in ("arch", "deb", "rpm", "flatpak", "nsis")
                ),
            ),
            "the machine's name in each packaging format",
        ),
        texts(
            "wheel_platforms",
            "the wheel platform families that install on it: `manylinux x86_64` is every "
            "manylinux level of that machine, a tag without a level is named whole (`win_amd64`)",
            default="[]",
        ),
        tables(
            "externals",
            Table(
                "[[<target>.externals]]",
                "Libraries a kept file may need that the user's system provides.",
                GROUP_KEYS,
            ),
            "allowed external groups",
            default="[]",
        ),
    ),
)

TARGETS_DATA = FileSchema(
    "targets-data",
    "Targets",
    "ortbundle/data/targets.toml",
    "The platform facts the closure check needs; a product's or recipe's [[externals]] are "
    "merged over its groups.",
    Table(
        "top level", "", entries=table("<target>", TARGET_DATA, "one target"), entry_pattern=WORD
    ),
)

# the loader's NT version ("10.0"), which [windows.names] names; and a DLL as imports name it,
# lower case, since imports are matched without case
_NT_VERSION = Pattern(re.compile(r"^[0-9]+\.[0-9]+$"), "an NT version such as 10.0")
_DLL = Pattern(re.compile(r"^[a-z0-9_.-]+\.dll$"), "a lower-case DLL file name")

WINDOWS_DLLS_DATA = FileSchema(
    "windows-system-dlls-data",
    "Windows system DLLs",
    "ortbundle/data/windows-system-dlls.toml",
    "The DLLs that are part of Windows, from Microsoft's documentation: each joins the Windows "
    "targets' system group.",
    Table(
        "top level",
        "",
        (
            text("group", "the targets.toml group of each Windows target they join", True),
            text("source", "the documented list they come from, and when it was read", True),
            table(
                "dlls",
                Table(
                    "[dlls]",
                    "",
                    entries=table(
                        "<dll>",
                        Table(
                            '[dlls."<dll>"]',
                            "One DLL of Windows.",
                            (
                                text(
                                    "doc",
                                    "the Microsoft Learn page that names the DLL (a function's "
                                    "Requirements table)",
                                    True,
                                ),
                                text(
                                    "since",
                                    "the NT version it first ships in, where newer than Windows 7",
                                    pattern=_NT_VERSION,
                                ),
                            ),
                        ),
                        "one DLL",
                    ),
                    entry_pattern=_DLL,
                ),
                "the DLLs, lower case",
                True,
            ),
        ),
    ),
)

_APISET = Pattern(re.compile(r"^(api|ext)-ms-[a-z0-9-]+-l[0-9]+-[0-9]+-[0-9]+$"), "an API set name")

WINDOWS_APISETS_DATA = FileSchema(
    "windows-apisets-data",
    "Windows API sets",
    "ortbundle/data/windows-apisets.toml",
    "The API sets a library may import, each with the first Windows version whose schema has it "
    "and where that is documented.",
    Table(
        "top level",
        "",
        (
            text("source", "the documentation the versions come from, and when it was read", True),
            table(
                "apisets",
                Table(
                    "[apisets]",
                    "",
                    entries=table(
                        "<apiset>",
                        Table(
                            '[apisets."<apiset>"]',
                            "One API set, lower case, without .dll.",
                            (
                                text(
                                    "since",
                                    "the NT version first having it",
                                    True,
                                    pattern=_NT_VERSION,
                                ),
                                text("doc", "where that is documented", True),
                            ),
                        ),
                        "one API set",
                    ),
                    entry_pattern=_APISET,
                ),
                "the API sets",
                True,
            ),
        ),
    ),
)

ARCH_DATA = FileSchema(
    "arch-data",
    "Arch package mapping",
    "ortbundle/data/arch.toml",
    "External group → Arch packages.",
    Table(
        "top level",
        "",
        (
            table(
                "groups",
                Table("[groups]", "", entries=table("<group>", ARCH_GROUP, "one group")),
                "one table per external group",
                True,
            ),
        ),
    ),
)

_PACKAGER = Table("[<packager>]", "", entries=table("<group>", LINUX_GROUP, "one group"))

LINUX_DATA = FileSchema(
    "linux-packages-data",
    "Debian and RPM package mapping",
    "ortbundle/data/linux-packages.toml",
    "External group → Debian and RPM package relations.",
    Table(
        "top level",
        "",
        (
            table("deb", _PACKAGER, "Debian relations per group", True),
            table("rpm", _PACKAGER, "RPM relations per group", True),
        ),
    ),
)


def _map(title: str, value: Key) -> Table:
    return Table(title, "", entries=value)


_VERSIONS = text("<version>", "a version string")

BASELINES_DATA = FileSchema(
    "baselines-data",
    "System baselines",
    "ortbundle/data/baselines.toml",
    "What a symbol version, Windows import or bionic node says about the oldest system.",
    Table(
        "top level",
        "",
        (
            table(
                "gcc",
                _map("[gcc]", table("<family>", _map("[gcc.<family>]", _VERSIONS), "node → GCC")),
                "libstdc++/libgcc_s version nodes → GCC release",
                True,
            ),
            table(
                "android",
                Table(
                    "[android]",
                    "",
                    (
                        table(
                            "nodes",
                            _map(
                                "[android.nodes]", Key("<node>", "integer", "API level", minimum=1)
                            ),
                            "bionic version nodes → API level",
                            True,
                        ),
                    ),
                ),
                "Android",
                True,
            ),
            table(
                "windows",
                Table(
                    "[windows]",
                    "",
                    (
                        table(
                            "names", _map("[windows.names]", _VERSIONS), "NT version → name", True
                        ),
                        table(
                            "functions",
                            _map(
                                "[windows.functions]",
                                table(
                                    "<dll>",
                                    _map("[windows.functions.<dll>]", _VERSIONS),
                                    "function → NT version",
                                ),
                            ),
                            "imports first exported by a Windows version",
                            True,
                        ),
                        table(
                            "dlls",
                            Table(
                                "[windows.dlls]",
                                "",
                                entries=text("<dll>", "NT version", pattern=_NT_VERSION),
                                entry_pattern=_DLL,
                            ),
                            "DLLs not Windows' own (windows-system-dlls.toml's `since` dates "
                            "those) that exist only from an NT version on",
                            True,
                        ),
                        table(
                            "machines",
                            Table(
                                "[windows.machines]",
                                "",
                                entries=text("<machine>", "NT version", pattern=_NT_VERSION),
                                entry_pattern=WORD,
                            ),
                            "PE machines Windows runs on only from an NT version on",
                            True,
                        ),
                    ),
                ),
                "Windows",
                True,
            ),
            table(
                "msvc",
                _map("[msvc]", texts("<dll>", "[toolset, Visual Studio release]", nonempty=True)),
                "Visual C++ runtime DLLs → toolset",
                True,
            ),
        ),
    ),
)

ACTIONS_DATA = FileSchema(
    "actions-data",
    "GitHub Actions pins",
    "ortbundle/data/actions.toml",
    "The actions the generated release workflow uses, pinned by commit.",
    Table(
        "top level",
        "",
        (
            table(
                "actions",
                Table(
                    "[actions]",
                    "",
                    entries=table(
                        "<owner/repo>",
                        Table(
                            '[actions."<owner/repo>"]',
                            "",
                            (
                                text("version", "the release tag the commit was read from", True),
                                text("commit", "the full commit SHA", True, pattern=COMMIT),
                            ),
                        ),
                        "one action",
                    ),
                    entry_pattern=ACTION,
                ),
                "pinned actions",
                True,
            ),
        ),
    ),
)

_DEB_PACKAGE = Table(
    '[releases."<release>".packages]',
    "The release's package of that name, as its package page says.",
    (
        text("version", "its version in the release as published (the release pocket)", True),
        text("source", "the package page the fact was read from", True),
    ),
)

DEB_RELEASES_DATA = FileSchema(
    "deb-releases-data",
    "Debian-family releases",
    "ortbundle/data/deb-releases.toml",
    "The releases a .deb may claim, and what each calls the libraries the bundle depends on.",
    Table(
        "top level",
        "",
        (
            table(
                "releases",
                Table(
                    "[releases]",
                    "",
                    entries=table(
                        "<release>",
                        Table(
                            '[releases."<release>"]',
                            "",
                            (
                                text("name", "the release's name", True),
                                text("glibc", "the glibc version the release ships", True),
                                table(
                                    "packages",
                                    Table(
                                        '[releases."<release>".packages]',
                                        "",
                                        entries=table("<package>", _DEB_PACKAGE, "one package"),
                                    ),
                                    "its packages, by name",
                                    True,
                                ),
                            ),
                        ),
                        "one release",
                    ),
                ),
                "the releases, by id (debian-10, ubuntu-18.04)",
                True,
            ),
        ),
    ),
)

DATA = (
    TARGETS_DATA,
    WINDOWS_DLLS_DATA,
    WINDOWS_APISETS_DATA,
    ARCH_DATA,
    LINUX_DATA,
    DEB_RELEASES_DATA,
    BASELINES_DATA,
    ACTIONS_DATA,
)
