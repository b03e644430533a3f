"""The schema of the user's input files: component and model recipes here, product manifests and
the licence policy in product_inputs.py; INPUTS names all four."""

from __future__ import annotations

from ortbundle.config.schema import choices as C
from ortbundle.config.schema.definitions import FileSchema, Key, Table
from ortbundle.config.schema.product_inputs import POLICY, PRODUCT
from ortbundle.config.schema.shared import (
    EXTERNALS,
    LOWER,
    NAME,
    PACKAGE_URL,
    SHA256,
    SHA256_LOWER,
    URL,
    WORD,
    table,
    tables,
    text,
    texts,
)

# --- sources ----------------------------------------------------------------------------------

BUILD = Table(
    "[sources.<id>.build]",
    "A binary built from source: which of the recipe's sources are its corresponding source "
    "(fetched and SHA-256-checked like any source, recorded in the manifest, the SBOM and the "
    "provenance, and shipped under sources/ when its licence asks for it), and the build that "
    "made it.",
    (
        texts(
            "sources",
            "ids of this recipe's [sources] that are the source archives it was built from",
            True,
            nonempty=True,
            ref="sources",
        ),
        text("command", "the build command, as run (the CMake configure and build)", True),
        text("toolchain", "the compiler and target it was built with", True),
        text("ort_headers", "the ONNX Runtime header version it was compiled against"),
        table(
            "outputs",
            Table(
                "outputs = { … }",
                "The archive `invoke build-source` packs from the build: each member, from a "
                "file of the build directory (where each source archive is unpacked under its "
                "id and the command runs).",
                entries=text("<member>", "the file it is packed from"),
            ),
            'the built archive\'s members: "ep-rocket/libonnxruntime_rocket.so" = '
            '"build/libonnxruntime_rocket.so"; without it the CI job cannot rebuild it',
            default="{}",
        ),
        texts(
            "packages",
            "Debian packages the build needs on a fresh runner (cmake, a cross compiler)",
            default="[]",
        ),
    ),
    example='[sources.ep-linux-aarch64.build]\nsources = ["ort-rocket", "rocket-userspace"]\n'
    'command = "cmake -S ort-rocket -B build && cmake --build build"\n'
    'toolchain = "aarch64-linux-gnu-gcc 14"\nort_headers = "1.24.4"\n'
    'outputs = { "ep-rocket/libonnxruntime_rocket.so" = "build/libonnxruntime_rocket.so" }\n'
    'packages = ["cmake"]',
)

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
        table(
            "build",
            BUILD,
            "this artifact was built from source (by the release engineer's CI): the pinned "
            "source archives it was built from and how",
        ),
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
        tables(
            "optional_loads",
            Table(
                "[[targets.<target>.optional_loads]]",
                "Libraries a kept file opens by name and works without, and what it does then: "
                "declared like `loads`, but optional, and they set no oldest system.",
                (
                    texts("names", "library file names, as they are opened", True, nonempty=True),
                    text("reason", "what the runtime does without them", True),
                ),
            ),
            "libraries opened by name that the runtime can do without",
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

DEVICE = Table(
    "device = { … }",
    "The device a plugin EP drives that the loader must find before it takes the EP's rung: "
    "an NPU behind /dev/accel (kind accel) of a kernel driver, on the boards named. The "
    "system requirement it states ('Linux with the <driver> accel driver') is in every output.",
    (
        text("kind", "what it is: accel (/dev/accel/accel*)", True, choices=C.DEVICE_KINDS),
        text(
            "driver",
            "the kernel driver of its /dev/accel node (/sys/class/accel/accel*/device/driver)",
            True,
            pattern=LOWER,
        ),
        texts(
            "compatible",
            "device-tree compatible strings of the boards it runs on (any of them)",
            default="[]",
        ),
    ),
)

SESSION_OPTIONS = Table(
    "[component.session_options]",
    "The session options the EP needs, carried in runtimes.json to the application with the "
    "loader's choice.",
    (
        text(
            "graph_optimization_level",
            "the level its sessions must run at",
            choices=C.GRAPH_OPTIMIZATION_LEVELS,
        ),
        table(
            "config",
            Table(
                "config = { … }",
                "Session configuration entries (AddSessionConfigEntry), key = value.",
                entries=text("<key>", "its value"),
            ),
            'session configuration entries: "session.intra_op.allow_spinning" = "0"',
            default="{}",
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
        table(
            "device",
            DEVICE,
            "the NPU it drives (the loader's rung for it)",
            when=("kind", ("plugin-ep",)),
        ),
        table(
            "session_options",
            SESSION_OPTIONS,
            "the session options its sessions need",
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

INPUTS = (RECIPE, MODEL_RECIPE, PRODUCT, POLICY)

# `pin --check` reads a recipe's [sources] alone: the rest is checked when a build loads it
RECIPE_SOURCES = FileSchema(
    "recipe-sources",
    "Recipe sources",
    "recipes/<component>.toml",
    "",
    Table("top level", "", (table("sources", SOURCES, "pinned artifacts", True),)),
)
