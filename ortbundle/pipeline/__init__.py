"""The build as a whole: orchestration, skipped work (the build key, the no-op record), preflight,
release merging and the summary a build prints."""
