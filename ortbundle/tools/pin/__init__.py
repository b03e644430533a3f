"""`invoke pin`: move a recipe's pins to another upstream release, and show what the move changes.

The index is the authority for the new digest: pin reads the SHA-256 the index publishes, then
downloads the file through the cache (which hashes while writing and refuses a mismatch) before
anything is written. The recipe is rewritten with tomlkit, so comments and layout survive, and
only by an atomic rename once every step has succeeded.

What follows the version, for each project P that moves from old version O to new version N:
- each moved `[sources.<id>]`: `pypi.version`, `pypi.filename`, `sha256`, `size`;
- `[component] version`, only when P is the component's own project (the project of its `ort-*`
  sources, else of most sources) and all of that project's sources move, and it equals O;
- `[component] description`: O as a whole version token becomes N;
- a licence rule's `version` equal to O, when P is the component's own project or the rule's
  component is P (OpenVINO's rule follows only an OpenVINO move); "<P> O" inside a version
  ("bundled with onnxruntime-webgpu 1.27.0") follows too; so does the rule's `@O` purl;
- a licence text's `member` from a moved source: its `<name>-O.dist-info/` prefix.
Comments are never rewritten; the ones that mention O are listed as notes to review by hand.

The new file of a source keeps the old file's wheel tags (python, ABI, platform set). When those
are missing, the closest file of the same platform family is taken (the smallest step in the
manylinux/musllinux/macOS/Android level, preferring no newer requirement) and the result says so.

Maven and npm sources (`maven = {…}`, `npm = {…}`) move the same way, with what those registries
publish. A project is `group:artifact` (Maven) or the package name (npm); its versions come from
maven-metadata.xml or the package document, ordered as Maven and semver order them, and the newest
release is the default: SNAPSHOTs and pre-release-looking versions (alpha, beta, milestone, rc,
preview, a semver `-tag`) are passed over unless the pin already is one. Neither registry
publishes a SHA-256 as a rule, so the new file is downloaded, hashed, and accepted only when it
matches the digest the registry does publish (Maven's .sha1/.sha256 sidecar; npm's integrity and
shasum): pin does not trust a download nothing vouches for. The file is stored in the cache, so
the comparison builds read it from there. For a source with `nested` archives, each member is
re-extracted from the new file under the same path and pinned by its own SHA-256 (a member the
new release lacks is an error; nothing is written). What is rewritten: `maven.version` or
`npm.version`, `sha256`, `size` (added beside the digest when missing), `nested[i].sha256`; the
component and licence rules follow as above, a rule counting as the project's own when its
component is the project, its artifact or its package name (its purl's `@O?type=aar` too).

Which sources move without --source: those of the component's own project (main_project): the
project of the source named `ort` or `ort-*`, else that of most sources (android-qnn: `ort`, the
ONNX Runtime AAR; its QNN SDK AAR moves only with `--source qnn`). One kind moves at a time:
--source naming a PyPI and an npm source together is refused.
"""

from ortbundle.fetch.maven import maven_key as maven_key
from ortbundle.tools.pin.check import CheckReport as CheckReport
from ortbundle.tools.pin.check import check_pins as check_pins
from ortbundle.tools.pin.compare import BumpReport as BumpReport
from ortbundle.tools.pin.compare import TargetBump as TargetBump
from ortbundle.tools.pin.compare import bump_report as bump_report
from ortbundle.tools.pin.core import NotMoved as NotMoved
from ortbundle.tools.pin.core import PinResult as PinResult
from ortbundle.tools.pin.core import pin as pin
from ortbundle.tools.pin.options import PinOptions as PinOptions
from ortbundle.tools.pin.options import PinStatus as PinStatus
from ortbundle.tools.pin.options import project_of as project_of
from ortbundle.tools.pin.rewrite import Edit as Edit
from ortbundle.tools.pin.rewrite import SourceMove as SourceMove
from ortbundle.tools.pin.rewrite import rewrite_recipe as rewrite_recipe
from ortbundle.tools.pin.select import is_prerelease as is_prerelease
from ortbundle.tools.pin.select import main_project as main_project
