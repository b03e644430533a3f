"""The enumerations the schema checks, each read from the one place the code keeps it: the word
lists from config/vocabulary.py, the targets and the GPU vendors from the tool's data files."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from functools import cache
from importlib import resources

from ortbundle.config import gpu_vendors, vocabulary
from ortbundle.config.schema.definitions import Choices


@cache
def _targets() -> Sequence[str]:
    """The target names: the tables of the tool's targets.toml. Read here, not through
    config/targets.py, which checks that file against this schema."""
    text = resources.files("ortbundle").joinpath("data/targets.toml").read_text("utf-8")
    return tuple(sorted(tomllib.loads(text)))


_VOCABULARY = "ortbundle/config/vocabulary.py"

GPU_VENDORS = Choices("GPU vendor", gpu_vendors.DATA_FILE, lambda: tuple(gpu_vendors.gpu_vendors()))
TARGETS = Choices("target", "ortbundle/data/targets.toml", _targets)
CHANNELS = Choices(
    "packaging channel",
    f"{_VOCABULARY} `CHANNEL_TARGETS`",
    lambda: tuple(vocabulary.CHANNEL_TARGETS),
)
RECIPE_KINDS = Choices(
    "component kind",
    f"{_VOCABULARY} `RECIPE_KINDS`, `MODEL_KIND`",
    lambda: (*vocabulary.RECIPE_KINDS, vocabulary.MODEL_KIND),
)
EXTERNAL_KINDS = Choices(
    "external kind", f"{_VOCABULARY} `EXTERNAL_KINDS`", lambda: vocabulary.EXTERNAL_KINDS
)
OPERATING_SYSTEMS = Choices(
    "operating system", f"{_VOCABULARY} `OPERATING_SYSTEMS`", lambda: vocabulary.OPERATING_SYSTEMS
)
FORMATS = Choices(
    "binary format", f"{_VOCABULARY} `BINARY_FORMATS`", lambda: vocabulary.BINARY_FORMATS
)
PAYLOAD_PLACES = Choices(
    "payload place", f"{_VOCABULARY} `PAYLOAD_PLACES`", lambda: vocabulary.PAYLOAD_PLACES
)
ON_NEWER = Choices("on_newer action", f"{_VOCABULARY} `ON_NEWER`", lambda: vocabulary.ON_NEWER)
POLICY_VERDICTS = Choices("verdict", f"{_VOCABULARY} `VERDICTS`", lambda: vocabulary.VERDICTS)
RELATIONS = Choices(
    "package relation", f"{_VOCABULARY} `PACKAGE_RELATIONS`", lambda: vocabulary.PACKAGE_RELATIONS
)
GUESSABLE = Choices("licence rule key", f"{_VOCABULARY} `GUESSABLE`", lambda: vocabulary.GUESSABLE)
DEVICE_KINDS = Choices(
    "device kind", f"{_VOCABULARY} `DEVICE_KINDS`", lambda: vocabulary.DEVICE_KINDS
)
GRAPH_OPTIMIZATION_LEVELS = Choices(
    "graph optimisation level",
    f"{_VOCABULARY} `GRAPH_OPTIMIZATION_LEVELS`",
    lambda: vocabulary.GRAPH_OPTIMIZATION_LEVELS,
)
