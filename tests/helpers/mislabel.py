"""Make a copied stage lie about itself, for the smoke probe to catch: the index names another
ONNX Runtime version, and models.json gives the sigmoid model logreg's reference and back."""

from __future__ import annotations

import json
from pathlib import Path

_SWAP = {"sigmoid": "logreg-iris", "logreg-iris": "sigmoid"}


def mislabel_stage(stage: Path, ort_version: str) -> None:
    """The first runtime's `ort_version` set to `ort_version`; each model judged by the other's
    reference numbers."""
    index_path, models_path = stage / "runtimes.json", stage / "models.json"
    index = json.loads(index_path.read_text("utf-8"))
    index["runtimes"][0]["ort_version"] = ort_version
    index_path.write_text(json.dumps(index), "utf-8")
    models = json.loads(models_path.read_text("utf-8"))
    for model in models["models"]:  # the sigmoid reference now judges logreg's outputs
        model["name"] = _SWAP[model["name"]]
    models_path.write_text(json.dumps(models), "utf-8")
