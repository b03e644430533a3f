"""invoke docs: the files generated from the one schema — docs/configuration.md for people,
schemas/*.json for editors — written, or checked for staleness (`--check`, exit 1)."""

from __future__ import annotations

from pathlib import Path

from ortbundle.cli.common import ROOT, CommandFailed


def run_docs(*, check: bool, root: Path = ROOT) -> None:
    from ortbundle.config.schema import docs, jsonschema

    if check:
        stale = [] if docs.is_current(root) else [docs.REFERENCE.as_posix()]
        stale += jsonschema.stale(root)
        if stale:
            raise CommandFailed(f"{', '.join(stale)}: stale, run invoke docs and commit", 1)
        return
    written = [docs.write(root), *jsonschema.write(root)]
    for path in written:
        print(f"wrote {path.relative_to(root)}")
