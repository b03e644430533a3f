"""Where packages come from: each tool's own configuration, never a host written in this repository.

A release engineer behind a mirror already told pip, Maven and npm where their repositories are
(`PIP_INDEX_URL`, a `<mirror>` in settings.xml, `registry=` in .npmrc); we read the same settings
so one change moves both. One reader per ecosystem; each runs only when something must be
downloaded.
"""

# Nothing is imported here: a module that needs only `redact` (the cache, the Fetcher) must not
# pay for the XML and .npmrc readers. Import from the reader itself: config.pip, config.maven,
# config.npm, config.urls.
