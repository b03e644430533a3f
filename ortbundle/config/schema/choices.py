"""The enumerations the schema checks, each read from the one place the code keeps it (imported
only when a value is checked or the reference is written: the schema itself stays free)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from importlib import resources

from ortbundle._core.errors import ConfigError
from ortbundle.config.schema.definitions import Choices

# The licence audit's verdicts, best first (ortbundle/licensing/audit.py ranks them in this order).
VERDICTS = ("allow", "review", "refuse")


# The loader's module that labels the GPU vendors it ranks (VENDOR_LABEL).
_SCORING = "payload/loader/scoring.py"


@cache
def _gpu_vendors() -> Sequence[str]:
    """The keys of the loader's VENDOR_LABEL (it compares lower-case vendor names). Checking a
    value imports none of the loader's modules: the one line is read from the module's text."""
    text = resources.files("ortbundle").joinpath(_SCORING).read_text("utf-8")
    found = re.search(r"^VENDOR_LABEL = \{(.*)\}$", text, re.MULTILINE)
    if found is None:
        raise ConfigError(f"ortbundle/{_SCORING} has no one-line VENDOR_LABEL = {{…}}")
    return tuple(re.findall(r'"([^"]+)":', found.group(1)))


@cache
def _targets() -> Sequence[str]:
    from ortbundle.config.targets import all_targets

    return tuple(sorted(all_targets()))


@cache
def _channels() -> Sequence[str]:
    from ortbundle.config.targets import CHANNEL_TARGETS

    return tuple(CHANNEL_TARGETS)


@cache
def _recipe_kinds() -> Sequence[str]:
    from ortbundle.config.model_recipes import MODEL_KIND
    from ortbundle.config.recipes import RECIPE_KINDS

    return (*RECIPE_KINDS, MODEL_KIND)


@cache
def _external_kinds() -> Sequence[str]:
    from ortbundle.config.targets import EXTERNAL_KINDS

    return EXTERNAL_KINDS


@cache
def _operating_systems() -> Sequence[str]:
    from ortbundle.config.targets import OPERATING_SYSTEMS

    return OPERATING_SYSTEMS


@cache
def _formats() -> Sequence[str]:
    from ortbundle.config.targets import BINARY_FORMATS

    return BINARY_FORMATS


@cache
def _payload_places() -> Sequence[str]:
    from ortbundle.config.recipes import PAYLOAD_PLACES

    return PAYLOAD_PLACES


@cache
def _on_newer() -> Sequence[str]:
    from ortbundle.config.products import ON_NEWER

    return ON_NEWER


@cache
def _relations() -> Sequence[str]:
    from ortbundle.channels.nfpm import _RELATIONS

    return _RELATIONS


GPU_VENDORS = Choices("GPU vendor", f"ortbundle/{_SCORING} `VENDOR_LABEL`", _gpu_vendors)
TARGETS = Choices("target", "ortbundle/data/targets.toml", _targets)
CHANNELS = Choices("packaging channel", "ortbundle/config/targets.py `CHANNEL_TARGETS`", _channels)
RECIPE_KINDS = Choices(
    "component kind", "ortbundle/config/recipes.py `RECIPE_KINDS`, model_recipes.py", _recipe_kinds
)
EXTERNAL_KINDS = Choices(
    "external kind", "ortbundle/config/targets.py `EXTERNAL_KINDS`", _external_kinds
)
OPERATING_SYSTEMS = Choices(
    "operating system", "ortbundle/config/targets.py `OPERATING_SYSTEMS`", _operating_systems
)
FORMATS = Choices("binary format", "ortbundle/config/targets.py `BINARY_FORMATS`", _formats)
PAYLOAD_PLACES = Choices(
    "payload place", "ortbundle/config/recipes.py `PAYLOAD_PLACES`", _payload_places
)
ON_NEWER = Choices("on_newer action", "ortbundle/config/products.py `ON_NEWER`", _on_newer)
POLICY_VERDICTS = Choices(
    "verdict", "ortbundle/config/schema/choices.py `VERDICTS`", lambda: VERDICTS
)
RELATIONS = Choices("package relation", "ortbundle/channels/nfpm.py `_RELATIONS`", _relations)
