"""Choose and open one ONNX Runtime per process.

Shipped in every package as `runtime_loader.py`, beside `runtimes.json`. Standard library only.

  python runtime_loader.py --explain      the decision in one line, then each candidate's score
  python runtime_loader.py --json         the same for machines
  python runtime_loader.py --open         also load the winner, check its version and register
                                          its plugin EPs (RegisterExecutionProviderLibrary);
                                          load the libraries using its core and say which
                                          custom-op libraries to register with each session

Rules: a vendor runtime on its own vendor's GPU beats OpenVINO on an Intel GPU, which beats a
runtime whose plugin EP's NPU is here (/dev/accel), which beats a generic (WebGPU) runtime on any
GPU, which beats a CPU-only runtime. Equal scores keep the
index's order; a perfect fit ends the search; the override variable named in the index wins
outright. Hardware is read from files (sysfs, /dev/kfd, /proc) under a root directory that tests
can point at a fake machine; on Windows the display adapters come from SetupAPI. A runtime the
system is too old for (its index entry's `system`: a symbol version the system's libc.so.6 or
libstdc++.so.6 does not define, a newer Windows or Android API level) is skipped, and
`--explain` says why. So is a runtime whose required system libraries (its entry's `requires`)
the platform's loader would not find — searched as ld.so does (LD_LIBRARY_PATH, the runtime's
directory, /etc/ld.so.cache, the default directories) or as Windows does (the runtime's
directory, System32, the Windows directory, PATH); a missing optional one is reported. Add-on
packages put their runtimes beside these and an index fragment in runtimes.d/*.json, ranked
like the package's own. `--open` asks each runtime it opens for GetAvailableProviders() and
trusts that over the index: a GPU runtime whose GPU provider is not available falls through.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from ortbundle.payload.loader.hardware import detect
from ortbundle.payload.loader.index import LoaderError, load_index
from ortbundle.payload.loader.ortapi import (
    Companion,
    Registered,
    companions,
    open_best,
    register_plugins,
)
from ortbundle.payload.loader.scoring import choose, device_rung
from ortbundle.payload.loader.search import system_libraries

# 128 + SIGPIPE: what a shell reports for a writer whose reader went away (`--json | head`)
_CLOSED_PIPE = 141
_SYSTEMS = {"linux": "Linux", "windows": "Windows", "android": "Android", "macos": "macOS"}
# sys.platform of each system but Linux ("linux"; Android's Python said so too before 3.13)
_PLATFORMS = {"win32": "windows", "android": "android", "darwin": "macos"}


def wrong_system(target: str, platform: str = sys.platform) -> str | None:
    """Why a bundle built for `target` (runtimes.json) cannot run under `platform`
    (sys.platform), or None when it can or either is unknown. Said first: a Windows bundle on
    Linux would otherwise be refused for lacking MSVCP140.dll, which is not the problem."""
    wanted = target.split("-", 1)[0]
    here = _PLATFORMS.get(platform, "")
    here = here or ("linux" if platform.startswith("linux") else "")
    if wanted not in _SYSTEMS or not here or wanted == here:
        return None
    if wanted == "android" and here == "linux":  # Android's Python said "linux" before 3.13
        return None
    article = "an" if wanted == "android" else "a"
    return (
        f"this is {article} {_SYSTEMS[wanted]} bundle (target {target}) and this machine runs "
        f"{_SYSTEMS[here]}: install the product's {_SYSTEMS[here]} package, or run this one on "
        f"{_SYSTEMS[wanted]}"
    )


def main(argv: list[str] | None = None) -> int:
    """The command line: 0 once a runtime is chosen (and opened, if asked), 1 with the reason,
    141 without a word when the reader of its output went away (`--json | head`)."""
    try:
        code = _command(argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
    except BrokenPipeError:
        # nothing more can be said; keep the interpreter's exit from trying again (a stdout
        # without a descriptor, a test's capture, has nothing left to flush)
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _CLOSED_PIPE
    return code


def _command(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    # runtime_loader.py is this module joined with its siblings into one file that sits in the
    # stage beside runtimes.json: its own directory is the stage
    parser.add_argument("--stage", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--root", type=Path, default=Path("/"), help="machine root (tests)")
    parser.add_argument("--explain", action="store_true", help="each candidate's score and why")
    parser.add_argument("--json", action="store_true", help="machine-readable decision")
    parser.add_argument(
        "--open", action="store_true", help="load the winner, check its version and providers"
    )
    parser.add_argument("--verify", action="store_true", help="hash the winner's files first")
    args = parser.parse_args(argv)
    try:
        index = load_index(args.stage)
        problem = wrong_system(str(index.get("target", "")))
        if problem:
            raise LoaderError(f"{args.stage / 'runtimes.json'}: {problem}")
        hardware = detect(args.root)
        libraries = system_libraries(
            str(index.get("target", "")), args.root, windows=sys.platform == "win32"
        )
        decision = choose(index, hardware, stage=args.stage, libraries=libraries)
        version = None
        plugins: list[Registered] = []
        beside: list[Companion] = []
        if args.open or args.verify:
            decision, version = open_best(
                args.stage,
                index,
                hardware,
                decision,
                libraries=libraries,
                verify=args.verify,
                providers=args.open,
            )
        if args.open:
            plugins = register_plugins(args.stage, decision.runtime, hardware)
            # the chosen runtime's NPU rung, now that its plugin has registered (a rung of
            # another runtime, one not chosen, stands as choose() said it)
            rung = device_rung(decision.runtime, hardware, plugins)
            decision.device = rung if rung is not None else decision.device
            beside = companions(args.stage, decision.runtime, load=True)
    except LoaderError as exc:
        print(f"runtime_loader: {exc}", file=sys.stderr)
        return 1
    for problem in decision.problems:
        print(f"runtime_loader: add-on skipped: {problem}", file=sys.stderr)
    if args.json:
        out = {
            "runtime": decision.runtime["name"],
            "directory": decision.runtime["directory"],
            "score": decision.score,
            "why": decision.why,
            "overridden": decision.overridden,
            "line": decision.line(),
            "loaded_version": version,
            "plugins": [asdict(p) for p in plugins],
            **({"companions": [asdict(c) for c in beside]} if beside else {}),
            **({"device": asdict(decision.device)} if decision.device else {}),
            "hardware": asdict(hardware),
            "candidates": [asdict(c) for c in decision.candidates],
            "problems": decision.problems,
        }
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    print(decision.line())
    if decision.device is not None:
        print(f"  {decision.device.why}")
        for key, value in sorted(decision.device.session_options.items()):
            print(f"    session option {key} = {json.dumps(value, sort_keys=True)}")
    if args.explain:
        for c in decision.candidates:
            if c.score == 0:
                print(f"  skip {c.name}: {c.why}")
            else:
                print(f"  {c.directory}: score {c.score} ({c.why})")
            for note in c.notes:
                print(f"    {note}")
    if version:
        print(f"  loaded ONNX Runtime {version}")
    for plugin in plugins:
        if plugin.status == "registered":
            print(
                f"  registered plugin EP {plugin.name} ({plugin.ep_name}, "
                f"{plugin.devices} device{'s' if plugin.devices != 1 else ''} here)"
            )
        else:
            print(f"  plugin EP {plugin.name} {plugin.status}: {plugin.why}")
    for companion in beside:
        if companion.status == "ready":
            print(
                f"  custom-op library {companion.name}: register {companion.library} with each "
                "session (RegisterCustomOpsLibrary)"
            )
        elif companion.status == "loaded":
            print(f"  loaded {companion.name} ({companion.library}) beside the core")
        else:
            print(f"  {companion.kind} {companion.name} {companion.status}: {companion.why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
