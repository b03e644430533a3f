"""The enumerations the schema checks, each read from the one place the code keeps it (imported
only when a value is checked or the reference is written: the schema itself stays free)."""

from __future__ import annotations

from collections.abc import Sequence

from ortbundle.schema.model import Choices

# The licence audit's verdicts, best first (ortbundle/audit.py ranks them in this order).
VERDICTS = ("allow", "review", "refuse")


def _gpu_vendors() -> Sequence[str]:
    from ortbundle.loader import VENDOR_LABEL  # the loader compares lower-case vendor names

    return tuple(VENDOR_LABEL)


def _targets() -> Sequence[str]:
    from ortbundle.targets import all_targets

    return tuple(sorted(all_targets()))


def _channels() -> Sequence[str]:
    from ortbundle.targets import CHANNEL_TARGETS

    return tuple(CHANNEL_TARGETS)


def _recipe_kinds() -> Sequence[str]:
    from ortbundle.model_recipes import MODEL_KIND
    from ortbundle.recipes import RECIPE_KINDS

    return (*RECIPE_KINDS, MODEL_KIND)


def _external_kinds() -> Sequence[str]:
    from ortbundle.targets import EXTERNAL_KINDS

    return EXTERNAL_KINDS


def _operating_systems() -> Sequence[str]:
    from ortbundle.targets import OPERATING_SYSTEMS

    return OPERATING_SYSTEMS


def _formats() -> Sequence[str]:
    from ortbundle.targets import BINARY_FORMATS

    return BINARY_FORMATS


def _payload_places() -> Sequence[str]:
    from ortbundle.recipes import PAYLOAD_PLACES

    return PAYLOAD_PLACES


def _on_newer() -> Sequence[str]:
    from ortbundle.products import ON_NEWER

    return ON_NEWER


def _relations() -> Sequence[str]:
    from ortbundle.channels.nfpm import _RELATIONS

    return _RELATIONS


GPU_VENDORS = Choices("GPU vendor", "ortbundle/loader.py `VENDOR_LABEL`", _gpu_vendors)
TARGETS = Choices("target", "ortbundle/data/targets.toml", _targets)
CHANNELS = Choices("packaging channel", "ortbundle/targets.py `CHANNEL_TARGETS`", _channels)
RECIPE_KINDS = Choices(
    "component kind", "ortbundle/recipes.py `RECIPE_KINDS`, model_recipes.py", _recipe_kinds
)
EXTERNAL_KINDS = Choices("external kind", "ortbundle/targets.py `EXTERNAL_KINDS`", _external_kinds)
OPERATING_SYSTEMS = Choices(
    "operating system", "ortbundle/targets.py `OPERATING_SYSTEMS`", _operating_systems
)
FORMATS = Choices("binary format", "ortbundle/targets.py `BINARY_FORMATS`", _formats)
PAYLOAD_PLACES = Choices("payload place", "ortbundle/recipes.py `PAYLOAD_PLACES`", _payload_places)
ON_NEWER = Choices("on_newer action", "ortbundle/products.py `ON_NEWER`", _on_newer)
POLICY_VERDICTS = Choices("verdict", "ortbundle/schema/choices.py `VERDICTS`", lambda: VERDICTS)
RELATIONS = Choices("package relation", "ortbundle/channels/nfpm.py `_RELATIONS`", _relations)
