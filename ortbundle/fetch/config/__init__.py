"""Where packages come from: each tool's own configuration, never a host written in this repository.

A release engineer behind a mirror already told pip, Maven and npm where their repositories are
(`PIP_INDEX_URL`, a `<mirror>` in settings.xml, `registry=` in .npmrc); we read the same settings
so one change moves both. One reader per ecosystem; each runs only when something must be
downloaded.
"""

from ortbundle.fetch.config.maven import (
    CENTRAL as CENTRAL,
)
from ortbundle.fetch.config.maven import (
    MavenConfig as MavenConfig,
)
from ortbundle.fetch.config.maven import (
    MavenRepository as MavenRepository,
)
from ortbundle.fetch.config.maven import (
    maven_config as maven_config,
)
from ortbundle.fetch.config.maven import (
    mirror_of_covers as mirror_of_covers,
)
from ortbundle.fetch.config.npm import NpmAuth as NpmAuth
from ortbundle.fetch.config.npm import NpmConfig as NpmConfig
from ortbundle.fetch.config.npm import npm_config as npm_config
from ortbundle.fetch.config.pip import IndexConfig as IndexConfig
from ortbundle.fetch.config.pip import index_config as index_config
from ortbundle.fetch.config.urls import redact as redact
from ortbundle.fetch.config.urls import split_credentials as split_credentials
