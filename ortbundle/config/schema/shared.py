"""What every input file's schema is built from: the value patterns, the key constructors, and
the [[externals]] groups a recipe, a product and the tool's data share."""

from __future__ import annotations

import re
from typing import Any

from ortbundle.config.schema import choices as C
from ortbundle.config.schema.definitions import Key, Pattern, Table
from ortbundle.config.vocabulary import NAME_WORD, PATH_WORD, PURL, TEMPLATES_DIR

NAME = Pattern(NAME_WORD, "lower-case letters, digits, . _ - (starting with a letter or digit)")
WORD = Pattern(PATH_WORD, "one plain name: letters, digits, . _ + -")
# a product's version names dist/<product>/<version>/, its scratch sibling and every package
# file (fakeproduct_<version>-1_amd64.deb): bounded so that each stays within a file name's 255
# bytes with the product's name, refused when the manifest is read rather than when a package
# is written after the downloads
VERSION_WORD = Pattern(
    re.compile(r"^[A-Za-z0-9_+][A-Za-z0-9._+-]{0,63}$"),
    "one plain name of at most 64 characters (it names dist/<product>/<version>/ and every "
    "package file): letters, digits, . _ + -",
)
SHA256 = Pattern(re.compile(r"^[0-9a-fA-F]{64}$"), "64 hex digits (a SHA-256)")
SHA256_LOWER = Pattern(re.compile(r"^[0-9a-f]{64}$"), "64 lower-case hex digits (a SHA-256)")
DOTTED = Pattern(re.compile(r"^[0-9]+(\.[0-9]+)+$"), 'a dotted version such as "2.28"')
LOWER = Pattern(re.compile(r"^[a-z0-9][a-z0-9 ._-]*$"), "lower case (the loader compares so)")
PACKAGE_URL = Pattern(PURL, "a package URL (pkg:type/name@version)")
URL = Pattern(re.compile(r"^https?://[^\s/]+"), "an http(s) URL")
TEMPLATES = Pattern(TEMPLATES_DIR, "templates or a directory in it (templates/acme)")


def text(name: str, doc: str, required: bool = False, **more: Any) -> Key:
    return Key(name, "string", doc, required, **more)


def texts(name: str, doc: str, required: bool = False, **more: Any) -> Key:
    return Key(name, "strings", doc, required, **more)


def table(name: str, shape: Table, doc: str, required: bool = False, **more: Any) -> Key:
    return Key(name, "table", doc, required, table=shape, **more)


def tables(name: str, shape: Table, doc: str, required: bool = False, **more: Any) -> Key:
    return Key(name, "tables", doc, required, table=shape, **more)


# --- externals: libraries a kept file may need that the user's machine provides, as groups
# saying who provides them, whether the runtime works without them, which version, how to
# install them and whether a Flatpak sandbox can; the tool's data, a recipe and a product
# share the group shape

GROUP_KEYS = (
    text("group", "the group's name; a product's or recipe's group replaces the tool's", True),
    text("kind", "who provides it on the user's machine", True, choices=C.EXTERNAL_KINDS),
    texts("names", "library file names (globs) the group provides", True, nonempty=True),
    Key(
        "optional",
        "boolean",
        "true: the runtime still works without it (a rung or feature is lost); "
        "false: the runtime cannot work without it (the loader skips the runtime)",
        default="false",
    ),
    text(
        "version",
        'a version constraint where it matters (">=13.0")',
        default='"" (any)',
        blank=True,
    ),
    text("note", "what it is, for a person", default='""', blank=True),
    text("install", "one sentence telling the user what to install", default='""', blank=True),
    Key(
        "sandbox",
        "boolean",
        "false: a Flatpak sandbox cannot provide it (a host-only stack such as CUDA)",
        default="true",
    ),
)

ARCH_GROUP = Table(
    "[groups.<group>]",
    "Arch packages for an external group.",
    (
        texts("depends", "Arch packages the bundle cannot load without", default="[]"),
        tables(
            "optdepends",
            Table(
                "optdepends = [{ … }]",
                "An Arch optional dependency and the reason pacman shows.",
                (
                    text("package", "the Arch package name", True),
                    text("reason", "one line: what it enables", True),
                ),
            ),
            "packages that enable a rung, each with its reason",
            default="[]",
        ),
    ),
)

LINUX_GROUP = Table(
    "[<packager>.<group>]",
    "Debian or RPM package relations for an external group.",
    (
        texts("depends", "packages the bundle cannot load without", default="[]"),
        texts("recommends", "packages that enable a rung, installed by default", default="[]"),
        texts("suggests", "vendor drivers behind a rung, the user's pick", default="[]"),
        text(
            "sonames",
            "the relation that names each library by its soname capability (RPM)",
            choices=C.RELATIONS,
        ),
    ),
)

EXTERNALS = Table(
    "[[externals]]",
    "A system requirement of the product's (or the component's) runtimes, merged over "
    "ortbundle/data/targets.toml: a group of the same name replaces the tool's, a new one is "
    "added. Precedence: product > recipe > tool data.",
    (
        *GROUP_KEYS,
        texts("targets", "the targets it applies to", default="every target", choices=C.TARGETS),
        table("arch", ARCH_GROUP, "Arch packages, shaped like a [groups.<g>] of data/arch.toml"),
        table("deb", LINUX_GROUP, "Debian packages, shaped like data/linux-packages.toml"),
        table("rpm", LINUX_GROUP, "RPM packages, shaped like data/linux-packages.toml"),
    ),
    example='[[externals]]\ngroup = "cudnn"\nkind = "toolkit"\n'
    'targets = ["linux-x86_64", "windows-x86_64"]\n'
    'names = ["libcudnn.so.9", "libcudnn_*.so.9", "cudnn64_9.dll"]\nversion = ">=9"\n'
    'install = "Install NVIDIA cuDNN 9 for CUDA 13"\nsandbox = false\n'
    'arch = { depends = ["cudnn"] }',
)
