"""The schema of a product manifest and of the licence policy (with a product's overlay of it)."""

from __future__ import annotations

from ortbundle.config.schema import choices as C
from ortbundle.config.schema.definitions import FileSchema, Key, Table
from ortbundle.config.schema.shared import (
    DOTTED,
    EXTERNALS,
    NAME,
    SHA256_LOWER,
    TEMPLATES,
    URL,
    VERSION_WORD,
    table,
    tables,
    text,
    texts,
)

# --- the licence policy, and a product's overlay of it ------------------------------------------

POLICY_CHANNEL = Table(
    "[channels.<channel>]",
    "One packaging channel's verdicts. Entries are globs over licence ids; @name expands a set.",
    (
        texts("targets", "globs over the targets it audits", default='["*"]'),
        texts("allow", "ships without a person looking at it", default="[]"),
        texts("review", "a person must read the terms (a release needs a waiver)", default="[]"),
        texts("refuse", "never ships on this channel", default="[]"),
        text(
            "unknown",
            "the verdict for a licence no list names",
            default='"review"',
            choices=C.POLICY_VERDICTS,
        ),
    ),
)

POLICY_KEYS = (
    table(
        "sets",
        Table(
            "[sets]",
            "Named lists of licence globs, used as @name.",
            entries=texts("<set>", "licence id globs"),
        ),
        "named licence sets",
        default="{}",
    ),
    table(
        "channels",
        Table(
            "[channels]",
            "One table per channel audited.",
            entries=table("<channel>", POLICY_CHANNEL, "that channel's verdicts"),
        ),
        "per-channel verdicts",
        default="{}",
    ),
)

OBLIGATIONS = table(
    "obligations",
    Table(
        "[obligations]",
        "What a licence asks of whoever ships its binaries, on every channel. A component "
        "under one of these ships its corresponding source beside the packages "
        "(dist/<product>/<version>/sources/), with a written offer in the NOTICE; a release "
        "refuses one whose recipe pins no source archives ([sources.<id>.build]), and no "
        "waiver stands in for them.",
        (
            texts(
                "source",
                "licence id globs (@set allowed) whose binaries ship with the whole work's "
                "corresponding source (GPL, LGPL, AGPL)",
                default="[]",
            ),
            texts(
                "combined",
                "licence id globs whose code, loaded into the application's process from its "
                "main package, makes one program with it (GPL, AGPL): a product whose licence "
                "is a LicenseRef (proprietary) is refused such a component there, and may ship "
                "it in an add-on's own optional package",
                default="[]",
            ),
            texts(
                "source_files",
                "licence id globs whose binaries ship with the source of the covered files "
                "(file-level copyleft: MPL)",
                default="[]",
            ),
        ),
    ),
    "source obligations",
    default="{}",
)

INCOMPATIBLE = tables(
    "incompatible",
    Table(
        "[[incompatible]]",
        "Licences no one program may carry together: a component under `first` and one under "
        "`second` (or the application, when its [product] license is an SPDX id) loaded into "
        "one process (a runtime and what pairs with it) fail the audit on every channel "
        "carrying that target, whatever the packaging; no waiver stands in.",
        (
            texts("first", "licence id globs (@set allowed) on one side", True, nonempty=True),
            texts("second", "licence id globs (@set allowed) on the other", True, nonempty=True),
            text("why", "why the two cannot be combined, as the report says it", True),
            text("source", "who says so (a licence text's section, the FSF's list)", True),
        ),
    ),
    "licence pairs refused in one process",
    default="[]",
)

POLICY = FileSchema(
    "policy",
    "Licence policy",
    "licenses/policy.toml",
    "Per packaging channel, which licences ship, need review or are refused.",
    Table("top level", "", (*POLICY_KEYS, OBLIGATIONS, INCOMPATIBLE)),
)

# --- product manifests ----------------------------------------------------------------------

PRODUCT_TABLE = Table(
    "[product]",
    "What is built.",
    (
        text("name", "the product's name", True, pattern=NAME),
        text("version", "becomes dist/<product>/<version>", True, pattern=VERSION_WORD),
        text("description", "one line", True),
        text("url", "the product's web page", True, pattern=URL),
        texts("targets", "targets built", True, nonempty=True, choices=C.TARGETS),
        texts("runtimes", "runtime recipes, in the loader's search order", True, nonempty=True),
        texts("models", "model recipes shipped on every target", default="[]"),
        texts(
            "channels",
            "packaging channels built",
            default="every channel one of whose targets is built",
            choices=C.CHANNELS,
        ),
        text(
            "addon_of",
            "the main product this one is an add-on of (installs into its directory)",
            pattern=NAME,
        ),
        Key(
            "suggested",
            "boolean",
            "an add-on: the main product's packages (Arch optdepends, deb and rpm Suggests) "
            "suggest this one's on its targets; never a dependency",
            default="false",
        ),
        text(
            "license",
            "the application's own licence: an SPDX expression, or LicenseRef-Proprietary. The "
            "audit judges each component under a licence the policy's [obligations] combined "
            "names against it: in a main package (loaded into the application's process) a "
            "proprietary product is refused it; an add-on's own optional package is an "
            "aggregate",
        ),
    ),
)

PACKAGING = Table(
    "[packaging]",
    "Package names and metadata.",
    (
        text(
            "package_name", "Arch pkgname, installer directory", default='"<product>-onnxruntime"'
        ),
        Key("pkgrel", "integer", "the package release", default="1", minimum=1),
        text("publisher", "installer publisher", default="the product name"),
        text("flatpak_app_id", "reverse-DNS application id", default='"org.example.<product>"'),
        text("flatpak_runtime", "Flatpak runtime", default='"org.freedesktop.Platform"'),
        text("flatpak_runtime_version", "its branch", default='"24.08"'),
        text("flatpak_sdk", "Flatpak SDK", default='"org.freedesktop.Sdk"'),
        text("flatpak_command", "the app's command", default="the product name"),
        texts(
            "flatpak_skip_runtimes",
            "runtimes left out of the Flatpak because they need host-only libraries the sandbox "
            "cannot see (the build says so); without it such a runtime stops the build",
            default="[]",
        ),
        text(
            "android_namespace",
            "Gradle namespace and Java package",
            default='"org.example.<product>.runtime"',
        ),
        text("maintainer", '"Name <address>" for .deb/.rpm', default="the publisher"),
        text(
            "templates",
            "the product's own template directory, searched before the project's templates/ "
            "(a file there named like a built-in template replaces it: invoke templates --list)",
            default='"templates"',
            pattern=TEMPLATES,
        ),
    ),
)

WAIVER = Table(
    "[[waivers]]",
    "A person's signed-off exception: the audit accepts this file's gap and says so.",
    (
        text("file", "glob over target-relative staged paths", True),
        text("license", "the attributed expression it accepts", True),
        text("reason", "why", True),
        text("reviewer", "who signed it off", True),
        texts("targets", "the targets it covers", default="every target", choices=C.TARGETS),
        texts("channels", "the channels it covers", default="every channel"),
        texts(
            "sha256",
            "the reviewed bytes, per covered file",
            default="[]",
            pattern=SHA256_LOWER,
            one=True,
        ),
        Key("reviewed", "date", "when it was reviewed"),
        Key("expires", "date", "when the review lapses"),
    ),
)

SYSTEM = Table(
    "[system]",
    "The oldest system the product promises to run on.",
    (
        text("glibc", "oldest glibc", pattern=DOTTED),
        text("windows", "oldest Windows, as an NT version", pattern=DOTTED),
        text("macos", "oldest macOS (the Mach-O files' minos)", pattern=DOTTED),
        Key("android_api", "integer", "oldest Android API level", minimum=1),
        text(
            "on_newer",
            "a runtime needing newer stops the build, or is reported",
            default='"error"',
            choices=C.ON_NEWER,
        ),
    ),
)

PRODUCT = FileSchema(
    "product",
    "Product manifests",
    "manifests/<product>.toml",
    "A product: its runtimes per target, channels, packaging, waivers, the oldest system, and "
    "its own system requirements and licence policy.",
    Table(
        "top level",
        "",
        (
            table("product", PRODUCT_TABLE, "what is built", True),
            table(
                "runtime",
                Table(
                    "[runtime]",
                    "A runtime shipped on fewer targets than the product.",
                    entries=table(
                        "<runtime>",
                        Table(
                            "[runtime.<runtime>]",
                            "",
                            (
                                texts(
                                    "targets", "its targets", True, nonempty=True, choices=C.TARGETS
                                ),
                            ),
                        ),
                        "one of [product] runtimes",
                    ),
                ),
                "per-runtime targets",
                default="every product target",
            ),
            table(
                "plugin",
                Table(
                    "[plugin]",
                    "A plugin EP recipe and the runtimes it registers with.",
                    entries=table(
                        "<plugin>",
                        Table(
                            "[plugin.<plugin>]",
                            "",
                            (texts("pairs_with", "runtimes that load it", True, nonempty=True),),
                        ),
                        "a plugin-ep recipe",
                    ),
                ),
                "plugin EPs",
                default="{}",
            ),
            table(
                "custom_ops",
                Table(
                    "[custom_ops]",
                    "A custom-operator library recipe (kind custom-ops) and the runtimes whose "
                    "sessions register it (RegisterCustomOpsLibrary).",
                    entries=table(
                        "<library>",
                        Table(
                            "[custom_ops.<library>]",
                            "",
                            (
                                texts(
                                    "pairs_with", "runtimes it registers with", True, nonempty=True
                                ),
                            ),
                        ),
                        "a custom-ops recipe",
                    ),
                ),
                "custom-operator libraries",
                default="{}",
            ),
            table(
                "uses_core",
                Table(
                    "[uses_core]",
                    "A library that uses a core (kind uses-core, like ONNX Runtime GenAI) and the "
                    "runtimes it is offered beside: each must ship the core it links or opens.",
                    entries=table(
                        "<library>",
                        Table(
                            "[uses_core.<library>]",
                            "",
                            (
                                texts(
                                    "pairs_with", "runtimes whose core it uses", True, nonempty=True
                                ),
                            ),
                        ),
                        "a uses-core recipe",
                    ),
                ),
                "libraries using a core",
                default="{}",
            ),
            table(
                "loader",
                Table(
                    "[loader]",
                    "The runtime loader.",
                    (
                        text(
                            "override_env",
                            "the variable naming a runtime directory that wins outright",
                            default='"ORTBUNDLE_RUNTIME_DIR"',
                        ),
                    ),
                ),
                "the loader",
                default="{}",
            ),
            table("packaging", PACKAGING, "package names and metadata", default="{}"),
            tables("waivers", WAIVER, "signed-off licence exceptions", default="[]"),
            table("system", SYSTEM, "the oldest system", default="{}"),
            tables("externals", EXTERNALS, "the product's system requirements", default="[]"),
            table(
                "policy",
                Table(
                    "[policy]",
                    "The product's licence policy overlay, shaped like licenses/policy.toml: its "
                    "sets and channel lists are merged over the project's policy (e.g. the "
                    "product's own LicenseRef-<Vendor>-* allowed on its channels).",
                    POLICY_KEYS,
                ),
                "licence policy overlay",
                default="{}",
            ),
        ),
    ),
)
