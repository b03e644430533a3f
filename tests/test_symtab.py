"""has_symbol_table reads the section headers itself: it agrees with pyelftools on real files."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from ortbundle.stage.binaries.symtab import has_symbol_table
from tests.helpers.bite import each
from tests.helpers.elf import make_elf


def _pyelftools(path: Path) -> bool:
    with path.open("rb") as stream:
        return any(s["sh_type"] == "SHT_SYMTAB" for s in ELFFile(stream).iter_sections())


def _compiled(tmp_path: Path, compiler: str, name: str) -> Path:
    if shutil.which(compiler) is None:
        pytest.skip(f"needs {compiler}")
    source = tmp_path / "lib.c"
    source.write_text("int answer(void) { return 42; }\n")
    out = tmp_path / name
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(out), str(source)], check=True)
    return out


def test_an_unstripped_library_has_one_and_its_stripped_copy_has_none(tmp_path: Path) -> None:
    built = _compiled(tmp_path, "gcc", "libanswer.so")
    stripped = tmp_path / "libanswer.stripped.so"
    subprocess.run(["strip", "-o", str(stripped), str(built)], check=True)
    assert has_symbol_table(built) is True is _pyelftools(built)
    assert has_symbol_table(stripped) is False is _pyelftools(stripped)


def test_an_aarch64_library_is_read_alike(tmp_path: Path) -> None:
    built = _compiled(tmp_path, "aarch64-linux-gnu-gcc", "libanswer.so")
    assert has_symbol_table(built) is True is _pyelftools(built)


def test_it_agrees_with_pyelftools_on_the_systems_libraries() -> None:
    libraries = sorted(Path("/usr/lib/x86_64-linux-gnu").glob("lib*.so.*"))[:40]
    for path in each((p for p in libraries if p.is_file()), "system libraries"):
        assert has_symbol_table(path) == _pyelftools(path), path


def test_anything_but_a_whole_elf_file_has_none(tmp_path: Path) -> None:
    whole = make_elf(soname="libx.so")
    cases = {
        "text": b"not an elf file at all",
        "short": b"\x7fELF\x02\x01",
        "truncated": whole[: len(whole) // 2],
        "bad class": whole[:4] + b"\x07" + whole[5:],
        "empty": b"",
    }
    for name, data in each(cases.items(), "cases"):
        (tmp_path / name).write_bytes(data)
        assert has_symbol_table(tmp_path / name) is False, name
