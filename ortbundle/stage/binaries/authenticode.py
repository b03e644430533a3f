"""A PE file's Authenticode signature, read as evidence: present or not, valid or not, whose.

Read with the `signify` library (an implementation of Authenticode independent of the
`osslsigncode` the build signs with): the PKCS#7 SignedData in the certificate table, the
digest of the image against the one signed, the signer's signature, the certificate chain
to a root of Microsoft's trusted root program (signify's bundled store, or the roots given),
and an RFC 3161 or Authenticode countersignature when there is one (a timestamped signature
stays valid after its certificate expires). Reading is pure and per file; the caller keeps
the result by the file's SHA-256 (stage/versions.py's memo).

signify imports oscrypto, whose release 1.3.0 cannot parse an OpenSSL version with a
two-digit patch number ("3.0.19": wbond/oscrypto#78, fixed upstream but not released) and
then refuses to load at all. `_import_signify` loads oscrypto's two version readers with the
upstream fix applied when, and only when, that exact failure happens.

signify is not safe to use from two threads at once: its trusted root store is one shared set
of asn1crypto certificates, parsed lazily on first use, and two verifications of timestamped
signatures racing through it read half-parsed certificates ("No field numbered 1 is present in
this asn1crypto.x509.NameTypeAndValue") — a valid Microsoft signature then reads as broken.
Targets are attributed in threads, so every reading holds `_VERIFYING`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["BROKEN", "UNSIGNED", "VALID", "PeSignature", "read_signature"]

UNSIGNED, VALID, BROKEN = "unsigned", "valid", "broken"


@dataclass(frozen=True)
class PeSignature:
    """What a PE file's Authenticode signature says; `status` is UNSIGNED, VALID or BROKEN."""

    status: str
    subject: str = ""  # the signer certificate's subject, RFC 4514 order ("CN=…, O=…, C=…")
    organization: str = ""  # its O= (else its CN=): the name compared with CompanyName
    issuer: str = ""
    sha256: str = ""  # the signer certificate's SHA-256 fingerprint (hex)
    timestamped: bool = False
    problem: str = ""  # why a BROKEN signature is (signify's words)

    @property
    def signer(self) -> str:
        return self.organization or self.subject


def signature_to_json(signature: PeSignature) -> dict[str, Any]:
    return {
        "status": signature.status,
        "subject": signature.subject,
        "organization": signature.organization,
        "issuer": signature.issuer,
        "sha256": signature.sha256,
        "timestamped": signature.timestamped,
        "problem": signature.problem,
    }


def signature_from_json(data: Any) -> PeSignature:
    return PeSignature(
        status=str(data["status"]),
        subject=str(data["subject"]),
        organization=str(data["organization"]),
        issuer=str(data["issuer"]),
        sha256=str(data["sha256"]),
        timestamped=bool(data["timestamped"]),
        problem=str(data["problem"]),
    )


def read_signature(path: Path, *, roots: Sequence[Path] = ()) -> PeSignature:
    """The Authenticode signature of the PE file at `path`.

    `roots` (PEM files) replace the trusted root store: a test CA, a TSA's CA, a company's own.
    Without them the chain must end in a root of Microsoft's program, as Windows requires.
    """
    signify = _import_signify()
    with _VERIFYING:
        return _read_signature(signify, path, roots)


def _read_signature(signify: ModuleType, path: Path, roots: Sequence[Path]) -> PeSignature:
    from signify.authenticode import AuthenticodeVerificationResult
    from signify.authenticode.signed_file.pe import SignedPEFile

    with path.open("rb") as stream:
        signed = SignedPEFile(stream)
        sections = signed.get_authenticode_omit_sections()
        if sections is not None and "certtable" not in sections:
            return PeSignature(UNSIGNED)  # no certificate table: never signed
        try:
            signatures = list(signed.iter_embedded_signatures(ignore_parse_errors=False))
        except signify.exceptions.ParseError as exc:
            return PeSignature(BROKEN, problem=f"unreadable signature: {exc}")
        if not signatures:
            return PeSignature(UNSIGNED)
        first = signatures[0]
        facts = _signer_facts(first)
        options: dict[str, Any] = {"multi_verify_mode": "first", "signature_types": "embedded"}
        if roots:
            options["trusted_certificate_store"] = _store(roots)
            options["verification_context_kwargs"] = {"allow_legacy": True}
        result, error = signed.explain_verify(**options)
    if result == AuthenticodeVerificationResult.OK:
        return PeSignature(VALID, **facts)
    return PeSignature(BROKEN, **facts, problem=f"{result.name.lower()}: {error}")


def _signer_facts(signature: Any) -> dict[str, Any]:
    """The signer certificate's names and fingerprint: the one the SignerInfo names by issuer
    and serial number among the certificates the SignedData carries."""
    info = signature.signer_info
    certificate = next(
        (
            c
            for c in signature.certificates
            if c.issuer == info.issuer and c.serial_number == info.serial_number
        ),
        None,
    )
    if certificate is None:  # a SignerInfo naming a certificate the SignedData lacks
        return {}
    names = dict(certificate.subject.get_components())
    return {
        "subject": certificate.subject.dn,
        "organization": str(names.get("O") or names.get("CN") or ""),
        "issuer": certificate.issuer.dn,
        "sha256": hashlib.sha256(certificate.to_der).hexdigest(),
        "timestamped": info.countersigner is not None,
    }


def _store(roots: Sequence[Path]) -> Any:
    from signify.x509 import Certificate, CertificateStore

    certificates = [c for root in roots for c in Certificate.from_pems(root.read_bytes())]
    return CertificateStore(certificates, trusted=True)


_ORIGINAL = b"'\\\\b(\\\\d\\\\.\\\\d\\\\.\\\\d[a-z]*)\\\\b'"
_FIXED = b"'\\\\b(\\\\d\\\\.\\\\d\\\\.\\\\d+[a-z]*)\\\\b'"


_IMPORTING = threading.Lock()  # targets are attributed in threads: one of them loads signify
_VERIFYING = threading.Lock()  # and one at a time reads signify's shared, lazily parsed roots


def _import_signify() -> ModuleType:
    """signify, with oscrypto's OpenSSL version readers fixed if they are the broken ones."""
    with _IMPORTING:
        return _import_signify_locked()


def _import_signify_locked() -> ModuleType:
    import oscrypto.errors

    try:
        importlib.import_module("signify.authenticode")
    except oscrypto.errors.LibraryNotFoundError as exc:
        if "version of libcrypto" not in str(exc):
            raise
        for name in ("oscrypto._openssl._libcrypto_cffi", "oscrypto._openssl._libcrypto_ctypes"):
            _load_fixed(name)
        importlib.import_module("signify.authenticode")
    return sys.modules["signify"]


def _load_fixed(name: str) -> None:
    """Load oscrypto's module `name` with upstream's version pattern (\\d+ for the patch)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.origin is None:
        return
    source = Path(spec.origin).read_bytes()
    if _ORIGINAL not in source:
        return  # not the 1.3.0 text: leave it to fail (or work) as it is
    module = importlib.util.module_from_spec(spec)
    code = compile(source.replace(_ORIGINAL, _FIXED), spec.origin, "exec")
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)  # noqa: S102 - oscrypto's own code, one pattern fixed
    except Exception:
        del sys.modules[name]
        raise
