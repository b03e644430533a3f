"""pip's index configuration, read through pip's public command line: `pip config list`
(every configuration file and the PIP_* environment, as pip merges them) and, when no index is
configured, the default that `pip download --help` names. Asked once per process and
environment, and only when something must be downloaded."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass

from ortbundle._core.errors import ConfigError
from ortbundle._core.oserrors import is_disk_error

# pip reads its configuration in this order; the later scope wins (`:env:` is PIP_* variables).
_SCOPES = ("global", "download", "install", ":env:")
_DEFAULT = re.compile(r"Base URL of the Python Package Index \(default\s+(\S+?)\)")
# what pip's answer depends on besides its files; a change of any re-asks pip
_ASKED_ENV = ("HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "VIRTUAL_ENV", "APPDATA")
_answers: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class IndexConfig:
    index_urls: tuple[str, ...]  # primary first, then extra indexes
    cert: str | None  # CA bundle for requests, as pip would use it


def _ask_pip(*args: str) -> str:
    """pip's standard output for `python -m pip <args>`, memoised per process and environment."""
    return _ask_pip_all([args])[0]


def _ask_pip_all(commands: list[tuple[str, ...]]) -> list[str]:
    """pip's standard output for each `python -m pip <args>`, memoised per process and
    environment. The ones not asked yet run side by side: each is a Python start and a pip
    import (about half a second), which a cold fetch otherwise paid twice in a row."""
    env = tuple(
        sorted((k, v) for k, v in os.environ.items() if k.startswith("PIP_") or k in _ASKED_ENV)
    )
    keys = [(" ".join(args), env) for args in commands]
    with _lock:
        asked = zip(keys, commands, strict=True)
        missing = [(key, args) for key, args in asked if key not in _answers]
        running: list[subprocess.Popen[str]] = []
        try:
            running += [_start_pip(args) for _, args in missing]
            for (key, args), process in zip(missing, running, strict=True):
                _answers[key] = _finish_pip(args, process)
        finally:
            for process in running:  # one failed: the others are not left running
                if process.poll() is None:
                    process.kill()
                    process.communicate()
        return [_answers[key] for key in keys]


def _start_pip(args: tuple[str, ...]) -> subprocess.Popen[str]:
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "pip", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except OSError as exc:
        if is_disk_error(exc):
            raise  # the machine's limit (no descriptors, no space), said as such
        raise ConfigError(f"pip's configuration cannot be read: {exc}") from None


def _finish_pip(args: tuple[str, ...], process: subprocess.Popen[str]) -> str:
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"pip's configuration cannot be read: `pip {' '.join(args)}` did not answer in 120 s"
        ) from None
    if process.returncode != 0:
        raise ConfigError(
            f"pip's configuration cannot be read: `pip {' '.join(args)}` failed "
            f"({err.strip().splitlines()[-1:] or process.returncode})",
            fix="fix pip's configuration (`python -m pip config debug` shows its files)",
        )
    return out


def pip_settings() -> dict[str, str]:
    """pip's effective settings (`index-url`, `extra-index-url`, `cert`, …), scopes merged."""
    found: dict[tuple[str, str], str] = {}
    for line in _ask_pip("config", "list").splitlines():
        key, sep, value = line.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot:
            continue
        try:
            parsed = ast.literal_eval(value)  # pip prints each value as a Python literal
        except (ValueError, SyntaxError):
            parsed = value
        found[(section, name)] = str(parsed)
    return {name: value for scope in _SCOPES for (s, name), value in found.items() if s == scope}


def pip_default_index() -> str:
    """The index pip uses when none is configured, as its own help states it."""
    text = " ".join(_ask_pip("download", "--help").split())
    match = _DEFAULT.search(text)
    if match is None:
        raise ConfigError(
            "pip's help names no default index, and none is configured",
            fix="set PIP_INDEX_URL (or index-url in pip.conf), or pass --index-url",
        )
    return match.group(1)


def index_config(explicit_index_url: str | None = None) -> IndexConfig:
    """The index URLs to resolve wheels through, as pip itself would use them."""
    if not explicit_index_url:  # pip's default is asked beside its settings, not after them
        _ask_pip_all([("config", "list"), ("download", "--help")])
    settings = pip_settings()
    cert = os.environ.get("REQUESTS_CA_BUNDLE") or settings.get("cert")
    if explicit_index_url:
        return IndexConfig(index_urls=(explicit_index_url,), cert=cert)
    primary = settings.get("index-url") or pip_default_index()
    extras = [
        url
        for url in settings.get("extra-index-url", "").split()
        if url.startswith(("http://", "https://"))  # pip's file:// extras are local wheelhouses
    ]
    return IndexConfig(index_urls=(primary, *extras), cert=cert)
