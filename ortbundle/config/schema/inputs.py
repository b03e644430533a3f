"""The schema of the user's input files: component and model recipes, product manifests and
the licence policy (with a product's overlay of it)."""

from __future__ import annotations

import re
from typing import Any

from ortbundle.config.schema import choices as C
from ortbundle.config.schema.definitions import FileSchema, Key, Pattern, Table
from ortbundle.config.vocabulary import NAME_WORD, PATH_WORD, PURL, TEMPLATES_DIR

NAME = Pattern(NAME_WORD, "lower-case letters, digits, . _ - (starting with a letter or digit)")
WORD = Pattern(PATH_WORD, "one plain name: letters, digits, . _ + -")
DIST_WORD = Pattern(
    PATH_WORD, "one plain name (it names a directory under dist/): letters, digits, . _ + -"
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

# --- sources ----------------------------------------------------------------------------------

SOURCE = Table(
    "[sources.<id>]",
    "One pinned upstream artifact.",
    (
        table(
            "pypi",
            Table(
                "pypi = { … }",
                "A wheel on the Python package index pip is configured for.",
                (
                    text("project", "the project name", True),
                    text("version", "the release", True),
                    text("filename", "the wheel's file name", True),
                ),
            ),
            "a PyPI wheel",
        ),
        table(
            "maven",
            Table(
                "maven = { … }",
                "group:artifact:version[:classifier]@packaging in a Maven repository.",
                (
                    text("group", "the group id", True),
                    text("artifact", "the artifact id", True),
                    text("version", "the version", True),
                    text("packaging", "the file's extension", default='"aar"'),
                    text("classifier", "the classifier, if any"),
                ),
            ),
            "a Maven artifact",
        ),
        table(
            "npm",
            Table(
                "npm = { … }",
                "A package version's tarball in an npm registry.",
                (
                    text("package", 'the package: "name" or "@scope/name"', True),
                    text("version", "the exact version", True),
                ),
            ),
            "an npm package",
        ),
        text("url", "a plain http(s) URL (no credentials, no query)", pattern=URL),
        text("path", "a file of the project, relative to its root"),
        text("sha256", "the fetched file's SHA-256 (`invoke pin` writes it)", True, pattern=SHA256),
        Key("size", "integer", "the file's size in bytes", minimum=1),
        text("hold", "why this pin must not follow newer releases (pin --check says so)"),
        tables(
            "nested",
            Table(
                "nested = [{ … }]",
                "An archive inside the fetched one, outermost first (at most 2 deep).",
                (
                    text("member", "its path in the enclosing archive", True),
                    text("sha256", "the nested archive's own SHA-256", True, pattern=SHA256),
                ),
            ),
            "archives read inside the download",
            default="[]",
        ),
        text("stale_record", "why the wheel's RECORD digests are not checked"),
    ),
    one_of=("pypi", "maven", "npm", "url", "path"),
    example='[sources.ort-linux]\npypi = { project = "onnxruntime", version = "1.32.0", '
    'filename = "onnxruntime-1.32.0-cp311-cp311-manylinux_2_27_x86_64.whl" }\n'
    'sha256 = "…"\nsize = 16027290',
)

SOURCES = Table(
    "[sources]",
    "The recipe's pinned artifacts, by id (the id names scratch files: one plain word).",
    entries=table("<id>", SOURCE, "one pinned artifact"),
    entry_pattern=WORD,
)

LICENSE_TEXTS = tables(
    "texts",
    Table(
        "texts = [{ … }]",
        "A licence text: { source, member } from an archive, or { file } under licenses/.",
        (
            text("source", "a source id of this recipe", ref="sources"),
            text("member", "the text's path in that source's archive"),
            text("file", "a path under the project's licenses/"),
        ),
    ),
    "where the component's licence texts come from",
    True,
)

CONFIRMATION = Table(
    "[targets.<target>.licenses.confirmed]",
    "A person's sign-off that the rule's claim holds for these files although their own "
    "evidence says otherwise (a copyright holder its texts do not name, 'All rights reserved' "
    "under a permissive claim): a development build relies on it and says so, a release only "
    "when it is signed off as a waiver is.",
    (
        text("reviewer", "who compared the files' evidence with the terms (a person)", True),
        text("reason", "what they compared, and why the claim holds", True),
        texts(
            "sha256",
            "the bytes compared: each file whose evidence put it to review",
            default="[]",
            pattern=SHA256_LOWER,
        ),
        Key("reviewed", "date", "when it was reviewed"),
        Key("expires", "date", "when the confirmation lapses", default="never"),
    ),
)

LICENSE_RULE = Table(
    "[[targets.<target>.licenses]]",
    "Which staged files belong to which licensed component.",
    (
        text("component", "the licensed component; becomes licenses/<component>/", True),
        text("version", "its version", True),
        text("expression", "its SPDX licence expression", True),
        texts("files", "globs over staged file names", True, nonempty=True),
        LICENSE_TEXTS,
        text(
            "purl",
            "package URL for the SBOM",
            default="derived from the source",
            pattern=PACKAGE_URL,
        ),
        texts(
            "licensor",
            "who licenses the component when its texts do not name them: a file whose own "
            "copyright holder neither these nor its texts name goes to review",
            default="[]",
        ),
        texts(
            "guessed",
            "the keys of this rule `invoke new-recipe` guessed: a build warns about each and a "
            "release refuses any; remove a key once a person has checked it",
            default="[]",
            choices=C.GUESSABLE,
        ),
        table(
            "confirmed",
            CONFIRMATION,
            "a person's sign-off that the claim holds though the files' evidence says otherwise",
        ),
    ),
)

TARGET = Table(
    "[targets.<target>]",
    "What the component ships on one target.",
    (
        text(
            "entry",
            "glob naming the entry library among the staged files: a runtime's exports "
            "OrtGetApiBase, a plugin EP's CreateEpFactories and ReleaseEpFactory (checked)",
            True,
        ),
        texts("roots", "globs over library names the closure starts from", True, nonempty=True),
        tables(
            "take",
            Table(
                "[[targets.<target>.take]]",
                "Which members of a source may be staged as libraries.",
                (
                    text("source", "a source id of this recipe", True, ref="sources"),
                    texts("libraries", "globs over member paths", True, nonempty=True),
                ),
            ),
            "at least one",
            True,
            nonempty=True,
        ),
        tables(
            "drop",
            Table(
                "[[targets.<target>.drop]]",
                "Libraries left out on purpose, and why.",
                (
                    texts("names", "globs over library file names", True, nonempty=True),
                    text("reason", "why they are left out", True),
                ),
            ),
            "libraries left out",
            default="[]",
        ),
        tables(
            "payload",
            Table(
                "[[targets.<target>.payload]]",
                "Files shipped verbatim beside the runtime, outside the library closure.",
                (
                    text("source", "a source id of this recipe", True, ref="sources"),
                    texts("files", "globs over member paths", True, nonempty=True),
                    texts("machines", "each file must be an ELF/PE of one of these", default="[]"),
                    text(
                        "place", "where it is staged", default='"beside"', choices=C.PAYLOAD_PLACES
                    ),
                    text("reason", "why it ships", True),
                ),
            ),
            "files shipped verbatim",
            default="[]",
        ),
        tables(
            "rename",
            Table(
                "[[targets.<target>.rename]]",
                "Ship a kept library under another name (its SONAME and users follow).",
                (
                    text("from", "the library's name in the source", True, pattern=WORD),
                    text("to", "the name it ships under", True, pattern=WORD),
                ),
            ),
            "renames",
            default="[]",
        ),
        tables("licenses", LICENSE_RULE, "licence attribution rules", default="[]"),
        texts(
            "loads",
            "libraries the kept files open by name at run time (dlopen, LoadLibrary): each must "
            "be a kept file or an external group",
            default="[]",
        ),
        tables(
            "ignore_loads",
            Table(
                "[[targets.<target>.ignore_loads]]",
                "Library names a kept file mentions but never loads here, and why.",
                (
                    texts("names", "library names (globs)", True, nonempty=True),
                    text("reason", "why they are not loaded", True),
                ),
            ),
            "names the run-time load detection may ignore",
            default="[]",
        ),
        texts(
            "providers",
            "this target's execution providers, where the targets' cores differ (macOS CoreML, "
            "then CPU): overrides [component] providers here and is checked the same way",
            default="[component] providers",
            nonempty=True,
        ),
    ),
)

COMPONENT = Table(
    "[component]",
    "What the component is.",
    (
        text("name", "must equal the file name", True, pattern=NAME),
        text(
            "kind",
            "what its entry is, read from its exports and imports (checked): runtime (exports "
            "OrtGetApiBase), plugin-ep (CreateEpFactories), custom-ops (RegisterCustomOps) or "
            "uses-core (links or opens the core); a model recipe says model",
            True,
            choices=C.RECIPE_KINDS,
        ),
        text("version", "the component's version", True),
        text("description", "one line", True),
        text("label", 'how a person names it ("OpenVINO")', default="the name"),
        texts(
            "providers",
            "its execution providers, each a name its libraries carry (checked; one its core "
            "offers and this leaves out is a warning); a custom-op library or a library using "
            "a core has none of its own (its core's are the runtime's)",
            True,
            nonempty=True,
            when=("kind", ("runtime", "plugin-ep")),
        ),
        texts(
            "gpu_vendors", "the GPU vendors it is ranked for", default="[]", choices=C.GPU_VENDORS
        ),
        texts("soc_families", "SoC vendors it needs (empty: any)", default="[]", pattern=LOWER),
        text(
            "ep_name",
            "the factory's EP name, a name its entry carries (checked)",
            True,
            when=("kind", ("plugin-ep",)),
        ),
        text(
            "min_core",
            "the oldest ONNX Runtime core it registers with",
            True,
            when=("kind", ("plugin-ep",)),
        ),
        text(
            "core_versions",
            "the ONNX Runtime core versions it fits, as a PEP 440 specifier (>=1.29,<1.31): its "
            "wheel's Requires-Dist on onnxruntime; a paired runtime outside it is refused",
            when=("kind", ("plugin-ep", "custom-ops", "uses-core")),
        ),
    ),
)

RECIPE = FileSchema(
    "recipe",
    "Component recipes",
    "recipes/<component>.toml",
    "A runtime, plugin EP, custom-op library or library using a core: sources, roots, drops, "
    "payloads, renames and licence rules per "
    "target, and what it needs of the system.",
    Table(
        "top level",
        "",
        (
            table("component", COMPONENT, "what the component is", True),
            table("sources", SOURCES, "pinned artifacts", True),
            table(
                "targets",
                Table(
                    "[targets]",
                    "One table per target the component ships on.",
                    entries=table("<target>", TARGET, "what it ships on that target"),
                    entry_choices=C.TARGETS,
                ),
                "per-target tables",
                True,
            ),
            tables("externals", EXTERNALS, "system requirements intrinsic to it", default="[]"),
        ),
    ),
)

# --- model recipes -------------------------------------------------------------------------

IO_GATE = Table(
    "inputs / outputs = [{ … }]",
    "A tensor the model must declare.",
    (
        text("name", "the input's or output's name", True),
        text("type", 'an ONNX element type ("FLOAT") or type string'),
        Key("shape", "list", 'dimensions: integers, symbolic names, "*" (any)'),
    ),
)

MODEL_FORM = Table(
    "[[forms]]",
    "One form of the model (f32, a quantised one, …).",
    (
        text("name", "becomes a file name", True, pattern=WORD),
        Key(
            "canonical", "boolean", "exactly one form is canonical (the f32 ONNX)", default="false"
        ),
        text("derived_from", "the form it was made from (not for the canonical one)"),
        text("source", "a source id of this recipe", True, ref="sources"),
        text("member", 'the member of the source; "" when the source is the file', blank=True),
        text("sha256", "the model file's own SHA-256", True, pattern=SHA256),
        texts("backends", "runtimes that load this form", True, nonempty=True),
        table(
            "gate",
            Table(
                "[forms.gate]",
                "What the model file must declare (checked when it is staged).",
                (
                    Key("min_ir_version", "integer", "the least IR version", minimum=1),
                    Key("min_opset", "integer", "the least opset", minimum=1),
                    tables("inputs", IO_GATE, "the inputs, each by name"),
                    tables("outputs", IO_GATE, "the outputs, each by name"),
                    Key("metadata", "any", "required keys (a list), or key = value (a table)"),
                ),
            ),
            "the model's gate",
            default="{}",
        ),
        tables(
            "sidecars",
            Table(
                "[[forms.sidecars]]",
                "A file staged beside the model (external weights).",
                (
                    text("member", "its archive member", True),
                    text("name", "its staged name", default="the member's base name", pattern=WORD),
                ),
            ),
            "files staged beside the model",
            default="[]",
        ),
    ),
)

MODEL_RECIPE = FileSchema(
    "model",
    "Model recipes",
    "recipes/<model>.toml",
    'An ONNX model (kind = "model"): each form pinned and gated.',
    Table(
        "top level",
        "",
        (
            table(
                "component",
                Table(
                    "[component]",
                    "What the model is.",
                    (
                        text("name", "must equal the file name", True, pattern=NAME),
                        text("kind", 'must be "model"', True, choices=C.RECIPE_KINDS),
                        text("version", "the model's version", True),
                        text("description", "one line", True),
                        text("label", "how a person names it", default="the name"),
                    ),
                ),
                "what the model is",
                True,
            ),
            table("sources", SOURCES, "pinned artifacts", True),
            table(
                "license",
                Table(
                    "[license]",
                    "The weights' licence.",
                    (
                        text("expression", "SPDX licence expression", True),
                        LICENSE_TEXTS,
                        text("purl", "package URL for the SBOM", pattern=PACKAGE_URL),
                    ),
                ),
                "the weights' licence",
                True,
            ),
            tables("forms", MODEL_FORM, "the model's forms", True, nonempty=True),
        ),
    ),
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

POLICY = FileSchema(
    "policy",
    "Licence policy",
    "licenses/policy.toml",
    "Per packaging channel, which licences ship, need review or are refused.",
    Table("top level", "", POLICY_KEYS),
)

# --- product manifests ----------------------------------------------------------------------

PRODUCT_TABLE = Table(
    "[product]",
    "What is built.",
    (
        text("name", "the product's name", True, pattern=NAME),
        text("version", "becomes dist/<product>/<version>", True, pattern=DIST_WORD),
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

INPUTS = (RECIPE, MODEL_RECIPE, PRODUCT, POLICY)

# `pin --check` reads a recipe's [sources] alone: the rest is checked when a build loads it
RECIPE_SOURCES = FileSchema(
    "recipe-sources",
    "Recipe sources",
    "recipes/<component>.toml",
    "",
    Table("top level", "", (table("sources", SOURCES, "pinned artifacts", True),)),
)
