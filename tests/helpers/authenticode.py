"""Test code-signing identities and a loopback RFC 3161 timestamp authority, made by openssl.

`make_identities(root)` writes a test CA, a code-signing certificate it issued (PEM, and a
PKCS#12 file with a password, as a real identity arrives), an expired one, a second unrelated
CA (the "wrong CA"), and a TSA CA with its timestamping certificate. `running_tsa(ids)` serves
`openssl ts -reply` on 127.0.0.1: osslsigncode posts a timestamp query, the handler pipes it
to openssl and answers with the reply, as a public TSA does over HTTP.

Nothing here is committed: each test session builds its own keys in a temporary directory.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest

from tests.helpers.loopback import QuietHandler

PASSWORD = "test-password"
SUBJECT = "/C=DE/O=Demo Org/CN=Demo Org Code Signing"
EXPIRED_SUBJECT = "/C=DE/O=Demo Org/CN=Demo Org Expired Signing"


@dataclass(frozen=True)
class Identities:
    root: Path
    ca: Path  # the test CA's certificate (PEM): what a verifier trusts
    cert: Path  # the code-signing certificate (PEM)
    key: Path  # its private key (PEM, unencrypted)
    pfx: Path  # both, as PKCS#12 with PASSWORD
    expired_cert: Path  # issued by `ca`, valid only in the past
    expired_key: Path
    wrong_ca: Path  # a CA that issued nothing here
    tsa_ca: Path  # the timestamp authority's CA
    tsa_cert: Path
    tsa_key: Path
    tsa_config: Path


def skip_without_signing_tools() -> None:
    """Skip, naming the Debian packages, unless openssl and osslsigncode are here."""
    missing = [tool for tool in ("openssl", "osslsigncode") if shutil.which(tool) is None]
    if missing:
        pytest.skip(
            f"needs {', '.join(missing)} (Debian/Ubuntu: apt-get install {' '.join(missing)})"
        )


def _openssl(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True)


def _ext(root: Path, name: str, text: str) -> Path:
    path = root / f"{name}.ext"
    path.write_text(text)
    return path


_CA_EXT = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
_SIGNING_EXT = (
    "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
    "extendedKeyUsage=critical,codeSigning\n"
)
_TSA_EXT = (
    "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
    "extendedKeyUsage=critical,timeStamping\n"
)


def _ca(root: Path, name: str, subject: str) -> tuple[Path, Path]:
    cert, key = root / f"{name}.pem", root / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
        "-days", "3650", "-subj", subject, "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=root,
    )  # fmt: skip
    return cert, key


def _issue(
    root: Path,
    name: str,
    subject: str,
    ca: tuple[Path, Path],
    ext: Path,
    *,
    dates: tuple[str, str] | None = None,
) -> tuple[Path, Path]:
    """A certificate for a new key, issued by `ca`; `dates` (YYYYMMDDHHMMSSZ) backdates it."""
    cert, key, csr = root / f"{name}.pem", root / f"{name}.key", root / f"{name}.csr"
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
             "-subj", subject, cwd=root)  # fmt: skip
    if dates is None:
        _openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
                 "-out", cert, "-days", "825", "-sha256", "-extfile", ext, cwd=root)  # fmt: skip
        return cert, key
    # `openssl ca` is the one that takes explicit start and end dates
    db = root / f"{name}-db"
    db.mkdir()
    (db / "index.txt").write_text("")
    (db / "serial").write_text("1000\n")
    config = root / f"{name}-ca.cnf"
    config.write_text(
        "[ca]\ndefault_ca=test\n[test]\n"
        f"database={db}/index.txt\nserial={db}/serial\nnew_certs_dir={db}\n"
        "default_md=sha256\npolicy=any\ncopy_extensions=none\nunique_subject=no\n"
        "[any]\ncountryName=optional\norganizationName=optional\ncommonName=supplied\n"
    )
    _openssl("ca", "-batch", "-config", config, "-in", csr, "-out", cert, "-cert", ca[0],
             "-keyfile", ca[1], "-startdate", dates[0], "-enddate", dates[1], "-extfile", ext,
             "-notext", cwd=root)  # fmt: skip
    return cert, key


def make_identities(root: Path) -> Identities:
    """Every certificate the signing tests use, written under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    signing_ext = _ext(root, "signing", _SIGNING_EXT)
    tsa_ext = _ext(root, "tsa", _TSA_EXT)
    ca = _ca(root, "ca", "/C=DE/O=Demo Org/CN=Demo Test Root CA")
    cert, key = _issue(root, "signer", SUBJECT, ca, signing_ext)
    expired_cert, expired_key = _issue(
        root, "expired", EXPIRED_SUBJECT, ca, signing_ext,
        dates=("20200101000000Z", "20210101000000Z"),
    )  # fmt: skip
    wrong_ca, _ = _ca(root, "wrong-ca", "/C=DE/O=Someone Else/CN=Unrelated Root CA")
    tsa_ca = _ca(root, "tsa-ca", "/C=DE/O=Demo TSA/CN=Demo Test TSA Root")
    tsa_cert, tsa_key = _issue(root, "tsa", "/C=DE/O=Demo TSA/CN=Demo Test TSA", tsa_ca, tsa_ext)
    pfx = root / "signer.p12"
    _openssl("pkcs12", "-export", "-in", cert, "-inkey", key, "-out", pfx,
             "-passout", f"pass:{PASSWORD}", cwd=root)  # fmt: skip
    tsa_config = root / "tsa.cnf"
    (root / "tsa-serial").write_text("01\n")
    tsa_config.write_text(
        "[tsa]\ndefault_tsa=test_tsa\n[test_tsa]\n"
        f"serial={root}/tsa-serial\nsigner_cert={tsa_cert}\nsigner_key={tsa_key}\n"
        f"certs={tsa_cert}\nsigner_digest=sha256\ndefault_policy=1.2.3.4.1\n"
        "digests=sha256,sha384,sha512\naccuracy=secs:1\nordering=yes\ness_cert_id_chain=no\n"
        "ess_cert_id_alg=sha256\n"
    )
    return Identities(
        root, ca[0], cert, key, pfx, expired_cert, expired_key, wrong_ca,
        tsa_ca[0], tsa_cert, tsa_key, tsa_config,
    )  # fmt: skip


@contextmanager
def running_tsa(ids: Identities) -> Iterator[str]:
    """An RFC 3161 timestamp authority on 127.0.0.1; yields its URL."""

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            query = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            reply = subprocess.run(
                ["openssl", "ts", "-reply", "-config", str(ids.tsa_config), "-queryfile",
                 "/dev/stdin", "-inkey", str(ids.tsa_key), "-signer", str(ids.tsa_cert)],
                input=query, capture_output=True, check=False,
            )  # fmt: skip
            if reply.returncode != 0:
                self.send(500, reply.stderr)
                return
            self.send(200, reply.stdout, "application/timestamp-reply")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
