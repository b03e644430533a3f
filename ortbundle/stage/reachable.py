"""The "never chosen" check: a runtime of a product that no machine would ever get.

The loader ranks a target's runtimes by one score per machine (payload/loader/scoring.py
`score`) and keeps the search order on equal scores, skipping a runtime whose required libraries
are absent or whose system is too new. A runtime listed after one that scores at least as high
on every machine, and that can run wherever it can, is dead weight: the classic mistake is
`runtimes = ["cuda", "cpu"]`, where the CUDA build scores as a CPU runtime on a machine without
an NVIDIA GPU and, coming first, wins every tie. The check runs on the index the build writes,
so it sees exactly what the loader will see.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from ortbundle._core.memo import NO_MEMO, Memo
from ortbundle.payload.loader.hardware import Gpu, Hardware
from ortbundle.payload.loader.scoring import score
from ortbundle.payload.loader.vendors import GPU_VENDORS
from ortbundle.stage.index_json import FRAGMENTS_DIR, INDEX_NAME

# the vendors a machine of the target can show (the loader's table, from data/gpu-vendors.toml)
_VENDORS = tuple(name for name, vendor in GPU_VENDORS.items() if vendor.on_pci)


@dataclass(frozen=True)
class NeverChosen:
    runtime: str
    target: str
    by: tuple[str, ...]  # the earlier runtimes that win over it
    fallback: bool = False  # chosen only where `by` cannot run (libraries absent, old system)

    def message(self) -> str:
        names = " and ".join(self.by)
        one = len(self.by) == 1
        fix = (
            f"list {self.runtime} before {names} in the product's `runtimes` (a specialised "
            f"runtime then wins only where it scores higher)"
        )
        if self.fallback:
            return (
                f"runtime {self.runtime} of {self.target} is chosen only where {names} cannot "
                f"run (a required library missing, an older system): wherever {names} "
                f"{'runs' if one else 'run'}, {'it scores' if one else 'they score'} at least "
                f"as high on every machine and, listed earlier, {'wins' if one else 'win'} "
                f"the tie — even without {'its' if one else 'their'} GPU; {fix}"
            )
        return (
            f"runtime {self.runtime} of {self.target} can never be chosen: {names} "
            f"{'scores' if one else 'score'} at least as high on every machine the loader "
            f"tells apart, can run wherever {self.runtime} can and, listed earlier, "
            f"{'wins' if one else 'win'} every tie; {fix}, or drop it from this target"
        )


def machines() -> list[Hardware]:
    """One machine per case the scoring tells apart: each set of usable GPU vendors, with or
    without any other GPU (a generic WebGPU runtime needs one)."""
    found = []
    for size in range(len(_VENDORS) + 1):
        for vendors in combinations(_VENDORS, size):
            for other_gpu in (False, True):
                # a SoC vendor is told by the SoC's name, the others by a card on the bus
                gpus = [
                    Gpu(v, GPU_VENDORS[v].pci_ids[0], 0, v)
                    for v in vendors
                    if not GPU_VENDORS[v].soc
                ]
                if other_gpu:
                    gpus.append(Gpu("other", 0x1A03, 0, "other"))
                found.append(
                    Hardware(
                        gpus=tuple(gpus),
                        kfd=any(GPU_VENDORS[v].driver == "kfd" for v in vendors),
                        nvidia_driver=any(
                            GPU_VENDORS[v].driver == "nvidia_driver" for v in vendors
                        ),
                        soc=" ".join(v for v in vendors if GPU_VENDORS[v].soc) or None,
                    )
                )
    return found


def _requires(runtime: dict[str, Any]) -> set[str]:
    return {str(r["name"]) for r in runtime.get("requires") or [] if not r.get("optional")}


def _system(runtime: dict[str, Any]) -> set[tuple[str, str]]:
    """The system floor as comparable facts: equal sets run on the same systems."""
    system = runtime.get("system") or {}
    facts = {(str(n["library"]), str(n["version"])) for n in system.get("needs", [])}
    facts |= {(k, str(system[k])) for k in ("windows", "android_api") if k in system}
    return facts


def _runs_wherever(rival: dict[str, Any], runtime: dict[str, Any]) -> bool:
    """Can `rival` run on every machine `runtime` runs on? (Not when it needs a library or a
    newer system that `runtime` does not: then `runtime` is the fallback there.)"""
    return _requires(rival) <= _requires(runtime) and _system(rival) <= _system(runtime)


def _beaten(runtimes: list[dict[str, Any]], position: int, rivals: list[int]) -> tuple[str, ...]:
    """The rivals that keep runtimes[position] from every machine, or () if one gets it."""
    runtime = runtimes[position]
    beaten_by: set[str] = set()
    for hardware in machines():
        points = score(runtime, hardware)[0]
        # an earlier runtime wins a tie, a later one must score higher
        winners = [
            runtimes[i]["name"]
            for i in rivals
            if (rival := score(runtimes[i], hardware)[0]) > points
            or (rival == points and i < position)
        ]
        if not winners:
            return ()  # this machine gets it
        beaten_by.add(winners[0])
    return tuple(r["name"] for r in runtimes if r["name"] in beaten_by)


def never_chosen(index: dict[str, Any]) -> list[NeverChosen]:
    """Each runtime of the index that the loader would pass over on every machine — or on
    every machine where an earlier runtime can run at all (then it is a fallback only)."""
    runtimes = list(index.get("runtimes") or [])
    target = str(index.get("target", ""))
    found = []
    for position, runtime in enumerate(runtimes):
        others = [i for i in range(len(runtimes)) if i != position]
        viable = [i for i in others if _runs_wherever(runtimes[i], runtime)]
        by = _beaten(runtimes, position, viable)
        if by:
            found.append(NeverChosen(runtime["name"], target, by))
        elif by := _beaten(runtimes, position, others):
            found.append(NeverChosen(runtime["name"], target, by, fallback=True))
    return found


def warning_lines(stages: list[Path], memo: Memo = NO_MEMO) -> list[str]:
    """One warning per never-chosen runtime of each built target stage, read from the index
    (runtimes.json, or an add-on's runtimes.d fragment) the build wrote there.

    `memo`: the build's, where the verdict on each index is kept, by its bytes and the tool's
    code: the same index gets the same verdict, and judging it scores 32 machines."""

    lines: list[str] = []
    for stage in stages:
        indexes = [stage / INDEX_NAME, *sorted((stage / FRAGMENTS_DIR).glob("*.json"))]
        for path in indexes:
            if path.is_file():
                index = path.read_bytes()
                lines += memo.remembered(
                    "reachable",
                    [hashlib.sha256(index).hexdigest()],  # the index's bytes, the tool's code
                    functools.partial(_warnings, index),
                    lambda found: found,
                    lambda kept: [str(line) for line in kept],
                )
    return lines


def _warnings(index: bytes) -> list[str]:
    return [f"warning: {n.message()}" for n in never_chosen(json.loads(index))]
