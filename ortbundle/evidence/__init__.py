"""What a build proves about itself: the manifest, SBOM, signatures, provenance, verification and
report.html."""
