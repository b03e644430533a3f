"""Hostile servers, archives and processes for tests/test_hostile_*.py.

`FaultServer` is the local index of `index_server.py` with more ways to misbehave on a file
download (a TCP reset, a stall, a trickle, no Content-Length, a redirect) and optionally TLS
with a throw-away self-signed certificate. The rest are small tools the hostile tests share:
rewriting a fake project's wheel in place, snapshotting a tree byte for byte, checking that a
cache holds only verified bytes, and running a build in a subprocess that can be killed at a
chosen phase.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
import signal
import stat
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ortbundle._core.fsio import sha256_file
from ortbundle.evidence.names import SUMMARY_NAME
from tests.helpers.index_server import IndexServer
from tests.helpers.project import FakeProject

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------ the server


# The fault-capable index lives in index_server.py (one server, every fault); the name stays.
FaultServer = IndexServer


def self_signed_cert(directory: Path) -> Path:
    """Write cert.pem / key.pem for 127.0.0.1 into `directory`; the cert is its own CA."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    (directory / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return directory / "cert.pem"


# ------------------------------------------------------------------------ project surgery


def republish(fake: FakeProject, target: str) -> None:
    """After a wheel changed on disk: serve the new bytes and pin them in the recipe."""
    fake.server.add("onnxruntime-fake", fake.wheels[target])
    (fake.root / "recipes" / "fake.toml").write_text(fake.recipe_text())


def patch_wheel(fake: FakeProject, target: str, old: bytes, new: bytes) -> None:
    """Replace raw bytes (a member name, in every header that holds it) and re-pin the wheel."""
    assert len(old) == len(new), "a same-length patch keeps every offset valid"
    path = fake.wheels[target]
    raw = path.read_bytes()
    assert raw.count(old) >= 2, f"{old!r} is not in the wheel's headers"
    path.write_bytes(raw.replace(old, new))
    republish(fake, target)


def pin_size(fake: FakeProject, source: str, size: int) -> None:
    """Add `size = N` to one source of the recipe (FakeProject writes none)."""
    recipe = fake.root / "recipes" / "fake.toml"
    text = recipe.read_text()
    head = f"[sources.{source}]\n"
    at = text.index(head)
    line_end = text.index("\n", text.index("sha256 = ", at)) + 1
    recipe.write_text(text[:line_end] + f"size = {size}\n" + text[line_end:])


# ----------------------------------------------------------------------- trees and caches


def snapshot(tree: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every entry under `tree`: kind, bytes (or link target) and mode; {} if it is absent."""
    out: dict[str, tuple[str, bytes, int]] = {}
    if not tree.exists():
        return out
    for path in sorted(tree.rglob("*")):
        info = path.lstat()
        rel = path.relative_to(tree).as_posix()
        if path.name == SUMMARY_NAME:  # a build's timings, written after it publishes
            continue
        if stat.S_ISLNK(info.st_mode):
            out[rel] = ("link", os.readlink(path).encode(), 0)
        elif stat.S_ISDIR(info.st_mode):
            out[rel] = ("dir", b"", stat.S_IMODE(info.st_mode))
        else:
            out[rel] = ("file", path.read_bytes(), stat.S_IMODE(info.st_mode))
    return out


def unverified_in_cache(cache: Path) -> list[str]:
    """Everything in the cache that is not verified data: a blob whose bytes do not hash to its
    name, a download left in partial/, or a half-written memo entry (`.partial-` anything)."""
    problems: list[str] = []
    blobs = cache / "sha256"
    for blob in sorted(blobs.rglob("*")) if blobs.exists() else []:
        if blob.is_file() and blob.suffix != ".json" and sha256_file(blob) != blob.name:
            problems.append(f"blob {blob.name} does not hash to its name")
    partial = cache / "partial"
    for leftover in sorted(partial.iterdir()) if partial.exists() else []:
        if leftover.stat().st_size:
            problems.append(f"partial download {leftover.name}")
    for leftover in sorted(cache.rglob("*.partial-*")) if cache.exists() else []:
        problems.append(f"half-written {leftover.relative_to(cache).as_posix()}")
    return problems


def blob_and_partial(cache: Path, sha256: str) -> list[str]:
    """What the cache holds for one pin, anywhere (blob, metadata, partial download)."""
    found = [
        cache / "sha256" / sha256[:2] / sha256,
        cache / "sha256" / sha256[:2] / f"{sha256}.json",
        cache / "partial" / f"{sha256}.part",
    ]
    return [p.relative_to(cache).as_posix() for p in found if p.exists()]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------- builds to be killed

# Build the fake project in a child process. argv: root, index, key, cache, dist, hook, marker.
# A hook stops the build at a phase: it touches `marker` and sleeps until killed.
_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import ortbundle.pipeline.build as b
    import ortbundle.channels.arch as arch
    import ortbundle.stage.runtime_cache as runtime_cache
    import ortbundle.stage.step as stage_step
    import ortbundle.evidence.step as evidence_step
    from ortbundle.config.retry import RetryPolicy
    from ortbundle._core.progress import plain_reporter

    root, index, key, cache, dist, hook, marker = sys.argv[1:8]
    cli = sys.argv[8:] == ["cli"]  # as `invoke build` runs it: run_build, one message, an exit code

    def stop_here():
        Path(marker).write_text("here")
        time.sleep(120)

    def after(function):
        def wrapper(*args, **kwargs):
            result = function(*args, **kwargs)
            stop_here()
            return result
        return wrapper

    if hook == "stage":
        stage_step.stage_runtime = after(stage_step.stage_runtime)
    elif hook == "channel":
        arch.ArchChannel.generate = after(arch.ArchChannel.generate)
    elif hook == "memo":  # inside store_runtime: the libraries are copied, the JSON is not
        runtime_cache._runtime_to_json = after(runtime_cache._runtime_to_json)
    elif hook == "evidence":  # in the main thread: packages written, the evidence not yet
        evidence_step.write_evidence = after(evidence_step.write_evidence)
    options = b.BuildOptions(
        product="fakeproduct", index_url=index, cache_dir=Path(cache), jobs=1,
        retry=RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.05, read_timeout=60.0),
        environ={"SOURCE_DATE_EPOCH": "1700000000", "ORTBUNDLE_SIGNING_KEY_FILE": key,
                 "HOME": str(Path(root) / "home")},
    )
    if cli:
        from ortbundle.cli import CommandFailed, run_build

        try:
            run_build(options, root=Path(root), dist=Path(dist))
        except CommandFailed as exc:
            print(exc, file=sys.stderr)
            sys.exit(exc.code)
    else:
        b.build(b.Project.at(Path(root), Path(dist)), options, plain_reporter())
    """
)


def start_build(
    fake: FakeProject,
    *,
    cache: Path,
    dist: Path,
    hook: str = "none",
    marker: Path | None = None,
    env: dict[str, str] | None = None,
    wrapper: tuple[str, ...] = (),
    cli: bool = False,
) -> subprocess.Popen[bytes]:
    """A build of the fake project in a child process (see `_SCRIPT` for the hooks; `env`
    adds variables, such as the tool's own fault points, ORTBUNDLE_FAULT; `wrapper` is a
    command the Python process runs under, such as `unshare`; `cli`: through run_build, as
    `invoke build` runs it)."""
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "LC_ALL": "C.UTF-8",
        **(env or {}),
    }
    args = [fake.server.url, str(fake.secret_key), str(cache), str(dist), hook]
    return subprocess.Popen(
        [
            *wrapper,
            sys.executable,
            "-c",
            _SCRIPT,
            str(fake.root),
            *args,
            str(marker or "/nonexistent"),
            *(["cli"] if cli else []),
        ],
        env=env,
        cwd=fake.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a build we started, and reap it."""
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL


# ------------------------------------------------------------------------------ outcomes


def public_key(fake: FakeProject) -> Path:
    return fake.root / "keys" / "fakeproduct.pub"


def version_dir(fake: FakeProject, dist: Path | None = None) -> Path:
    return (dist or fake.root / "dist") / "fakeproduct" / "1.2.3"


def assert_published_and_verified(fake: FakeProject, dist: Path | None = None) -> None:
    """dist holds exactly one complete, signed version tree and no scratch or old tree."""
    from ortbundle.evidence.verify import verify_tree

    product_dir = version_dir(fake, dist).parent
    assert sorted(p.name for p in product_dir.iterdir()) == ["1.2.3"]
    report = verify_tree(version_dir(fake, dist), public_key=public_key(fake))
    assert report.ok and report.signed_by, report.lines()


def big_payload(size: int = 256 << 10) -> bytes:
    """Incompressible bytes, so a wheel is large enough to be cut mid-body."""
    import random

    return random.Random(0).randbytes(size)


# ----------------------------------------------------------------------- zip surgery

# Offsets of a member's fields in its local header and in its central-directory entry.
_LOCAL = {
    "version": (4, "<H"),  # version needed to extract
    "flags": (6, "<H"),
    "method": (8, "<H"),
    "crc": (14, "<I"),
    "usize": (22, "<I"),
}
_CENTRAL = {
    "made_by": (4, "<H"),  # the host system in the high byte (3 Unix, 19 macOS), spec version low
    "version": (6, "<H"),
    "flags": (8, "<H"),
    "method": (10, "<H"),
    "crc": (16, "<I"),
    "usize": (24, "<I"),
    "external": (38, "<I"),  # the Unix mode in the high 16 bits (S_IFLNK: a symlink)
}


def set_member_field(path: Path, member: str, field: str, value: int) -> None:
    """Rewrite one header field of `member` in both of its headers (or the central one only)."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    raw = bytearray(path.read_bytes())
    local_at = info.header_offset
    assert raw[local_at : local_at + 4] == b"PK\x03\x04"
    name = member.encode()
    central_at = -1
    search = 0
    while (at := raw.find(b"PK\x01\x02", search)) != -1:
        name_len = struct.unpack_from("<H", raw, at + 28)[0]
        if raw[at + 46 : at + 46 + name_len] == name:
            central_at = at
            break
        search = at + 4
    assert central_at != -1, member
    if field in _LOCAL:
        offset, fmt = _LOCAL[field]
        struct.pack_into(fmt, raw, local_at + offset, value)
    offset, fmt = _CENTRAL[field]
    struct.pack_into(fmt, raw, central_at + offset, value)
    path.write_bytes(bytes(raw))


def member_data_offset(path: Path, member: str) -> int:
    """Where `member`'s (compressed) bytes start in the file."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    raw = path.read_bytes()
    name_len, extra_len = struct.unpack_from("<HH", raw, info.header_offset + 26)
    return int(info.header_offset) + 30 + int(name_len) + int(extra_len)


def make_elf32(*, machine: int = 62, soname: str, needed: tuple[str, ...] = ()) -> bytes:
    """A little-endian ELFCLASS32 ET_DYN (machine 62 = EM_X86_64: the x32 ABI)."""
    ehsize, phentsize, phnum = 52, 32, 2
    strtab = bytearray(b"\x00")
    offsets = {}
    for name in (*needed, soname):
        offsets[name] = len(strtab)
        strtab += name.encode() + b"\x00"
    strtab_off = ehsize + phentsize * phnum
    dyn_off = strtab_off + len(strtab)
    dyn_off += -dyn_off % 4
    entries = [(1, offsets[n]) for n in needed] + [(14, offsets[soname])]
    entries += [(5, strtab_off), (10, len(strtab)), (0, 0)]
    dynamic = b"".join(struct.pack("<iI", tag, value) for tag, value in entries)
    total = dyn_off + len(dynamic)
    ident = b"\x7fELF" + bytes([1, 1, 1, 0]) + b"\x00" * 8
    header = ident + struct.pack(
        "<HHIIIIIHHHHHH", 3, machine, 1, 0, ehsize, 0, 0, ehsize, phentsize, phnum, 40, 0, 0
    )
    load = struct.pack("<IIIIIIII", 1, 0, 0, 0, total, total, 5, 0x1000)
    dyn = struct.pack("<IIIIIIII", 2, dyn_off, dyn_off, dyn_off, len(dynamic), len(dynamic), 6, 4)
    out = bytearray(header + load + dyn + strtab)
    out += b"\x00" * (dyn_off - len(out))
    return bytes(out + dynamic)


def rewrite_with_csv_record(fake: FakeProject, target: str) -> None:
    """Rewrite a wheel with its RECORD written by the csv module (so member names holding
    commas, quotes or newlines are recorded as a real wheel builder would), then re-pin it."""
    import base64
    import csv
    import io
    import zipfile

    path = fake.wheels[target]
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    record_name = next(n for n in members if n.endswith(".dist-info/RECORD"))
    del members[record_name]
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    for name, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([name, f"sha256={digest}", len(data)])
    writer.writerow([record_name, "", ""])
    members[record_name] = text.getvalue().encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    republish(fake, target)


def set_roots(fake: FakeProject, target: str, roots: list[str]) -> None:
    """Rewrite a target's `roots` in the recipe as a proper TOML array (any characters)."""
    import json

    recipe = fake.root / "recipes" / "fake.toml"
    lines = recipe.read_text().splitlines(keepends=True)
    at = lines.index(f"[targets.{target}]\n")
    index = next(i for i in range(at, len(lines)) if lines[i].startswith("roots = "))
    lines[index] = f"roots = {json.dumps(roots)}\n"
    recipe.write_text("".join(lines))
