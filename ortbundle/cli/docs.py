"""invoke docs: the files generated from the one schema — docs/configuration.md for people,
schemas/*.json for editors — and the loader's copy of the GPU vendors' data file
(payload/loader/vendors.py), written, or checked for staleness (`--check`, exit 1)."""

from __future__ import annotations

from pathlib import Path

from ortbundle.cli.common import ROOT, CommandFailed


def run_docs(*, check: bool, root: Path = ROOT) -> None:
    from ortbundle.config import gpu_vendors
    from ortbundle.config.schema import docs, jsonschema

    if check:
        stale = [] if docs.is_current(root) else [docs.REFERENCE.as_posix()]
        stale += jsonschema.stale(root)
        if not gpu_vendors.loader_copy_is_current(root):
            stale.append(gpu_vendors.LOADER_COPY.as_posix())
        if stale:
            raise CommandFailed(f"{', '.join(stale)}: stale, run invoke docs and commit", 1)
        return
    written = [docs.write(root), *jsonschema.write(root), gpu_vendors.write_loader_copy(root)]
    for path in written:
        print(f"wrote {path.relative_to(root)}")
