"""The names of the evidence files beside a version's packages: known to the steps that write them,
the summary that points at them and the CI workflow that uploads them, without importing any of
those steps."""

from __future__ import annotations

MANIFEST_NAME = "manifest.json"
SIGNATURE_NAME = "manifest.json.minisig"
SBOM_NAME = "sbom.cdx.json"
AUDIT_NAME = "audit.json"
SUMMARY_NAME = "build-summary.json"  # what a build printed, as JSON (pipeline/summary.py)
PROVENANCE_NAME = "provenance.intoto.json"
REPORT_NAME = "report.html"
