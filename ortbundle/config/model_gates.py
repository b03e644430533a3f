"""What a model recipe says its model must be (a gate), and the model description it is held
against: IR version, opsets, inputs and outputs with types and shapes, metadata.

The gate is configuration, read from the recipe's TOML; the description is filled in from the
file by stage/onnx_model.py, which believes the file, not the recipe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ortbundle._core.errors import BinaryError, ConfigError
from ortbundle._core.words import plural

# TensorProto.DataType, onnx/onnx.proto (onnx 1.23)
DATA_TYPES: dict[int, str] = {
    0: "UNDEFINED",
    1: "FLOAT",
    2: "UINT8",
    3: "INT8",
    4: "UINT16",
    5: "INT16",
    6: "INT32",
    7: "INT64",
    8: "STRING",
    9: "BOOL",
    10: "FLOAT16",
    11: "DOUBLE",
    12: "UINT32",
    13: "UINT64",
    14: "COMPLEX64",
    15: "COMPLEX128",
    16: "BFLOAT16",
    17: "FLOAT8E4M3FN",
    18: "FLOAT8E4M3FNUZ",
    19: "FLOAT8E5M2",
    20: "FLOAT8E5M2FNUZ",
    21: "UINT4",
    22: "INT4",
    23: "FLOAT4E2M1",
    24: "FLOAT8E8M0",
    25: "UINT2",
    26: "INT2",
    27: "FLOAT6E2M3",
    28: "FLOAT6E3M2",
}


DATA_TYPE_NAMES = frozenset(DATA_TYPES.values())


DEFAULT_DOMAINS = ("", "ai.onnx")  # both name the default operator set


def data_type_name(value: int) -> str:
    """The TensorProto.DataType name of an element type; ``UNKNOWN_<n>`` past the known ones."""
    return DATA_TYPES.get(value, f"UNKNOWN_{value}")


@dataclass(frozen=True)
class Opset:
    domain: str  # "" (or "ai.onnx") is the default ONNX operator set
    version: int


@dataclass(frozen=True)
class TensorSpec:
    """One graph input or output.

    ``kind`` is the ``TypeProto`` member in use: ``tensor``, ``sparse_tensor``, ``sequence``,
    ``map``, ``optional``, ``opaque``, or ``""`` when the file gives no type. ``elem_type`` is the
    TensorProto.DataType name for the tensor kinds and ``""`` for the others; ``shape`` is None
    when the file gives no shape (always for the non-tensor kinds), and each dimension is an int
    (``dim_value``), a str (``dim_param``, symbolic) or None (neither: unknown).
    """

    name: str
    elem_type: str
    shape: tuple[int | str | None, ...] | None
    kind: str = "tensor"
    type_string: str = ""  # ONNX's own notation: tensor(float), seq(map(int64,tensor(float)))

    @property
    def onnx_type(self) -> str:
        if self.type_string:
            return self.type_string
        if self.kind in ("tensor", "sparse_tensor"):
            return f"{self.kind}({self.elem_type.lower()})"
        return self.kind

    def describe(self) -> str:
        return f"{self.name}: {self.onnx_type} {format_shape(self.shape)}"


@dataclass(frozen=True)
class ModelInfo:
    ir_version: int
    producer_name: str
    producer_version: str
    domain: str
    model_version: int
    opsets: tuple[Opset, ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    metadata: tuple[tuple[str, str], ...]  # metadata_props, in file order
    graph_name: str = ""
    doc_string: str = ""

    @property
    def metadata_dict(self) -> dict[str, str]:
        """The metadata as a dict; a key given twice keeps its last value."""
        return dict(self.metadata)

    def opset(self, domain: str = "") -> int | None:
        """The imported version of an operator set domain ("" and "ai.onnx" are one domain).

        None when the file does not import it; the lowest when it is imported more than once.
        """
        wanted = DEFAULT_DOMAINS if domain in DEFAULT_DOMAINS else (domain,)
        versions = [o.version for o in self.opsets if o.domain in wanted]
        return min(versions) if versions else None


def format_shape(shape: tuple[int | str | None, ...] | None) -> str:
    if shape is None:
        return "[shape unknown]"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


ANY = "*"


_TYPE_STRING = re.compile(r"^[a-z_]+\(.*\)$")


@dataclass(frozen=True)
class IOGate:
    """What one input or output must be. ``type`` None or ``shape`` None: anything goes."""

    name: str
    type: str | None = None  # a DataType name (FLOAT) or an ONNX type string (seq(tensor(float)))
    shape: tuple[int | str, ...] | None = None  # ints, symbolic names, or "*" for any dim

    def problems(self, spec: TensorSpec, role: str) -> list[str]:
        found: list[str] = []
        if self.type is not None:
            if self.type in DATA_TYPE_NAMES:
                ok = spec.kind == "tensor" and spec.elem_type == self.type
                wanted = f"tensor({self.type.lower()})"
            else:
                ok = spec.onnx_type == self.type
                wanted = self.type
            if not ok:
                found.append(
                    f"{role} {self.name!r}: expected type {wanted}, the file says "
                    f"{spec.onnx_type or 'no type'}"
                )
        if self.shape is not None and not _shape_matches(self.shape, spec.shape):
            found.append(
                f"{role} {self.name!r}: expected shape {format_shape(self.shape)}, the file says "
                f"{format_shape(spec.shape)}"
            )
        return found


def _shape_matches(
    wanted: tuple[int | str, ...], shape: tuple[int | str | None, ...] | None
) -> bool:
    if shape is None or len(shape) != len(wanted):
        return False
    return all(
        w == ANY or (type(w) is type(d) and w == d) for w, d in zip(wanted, shape, strict=True)
    )


@dataclass(frozen=True)
class ModelGate:
    """What a model file must declare for its form of a component to be built.

    ``inputs`` / ``outputs`` None: not checked; given: the file's names must be exactly these
    (order free), each with its type and shape where the gate gives one. ``metadata``: each key
    must be present, with the given value unless that is None.
    """

    min_ir_version: int | None = None
    min_opset: int | None = None  # of the default domain ("" / "ai.onnx")
    inputs: tuple[IOGate, ...] | None = None
    outputs: tuple[IOGate, ...] | None = None
    metadata: tuple[tuple[str, str | None], ...] = ()

    def violations(self, info: ModelInfo) -> list[str]:
        """Every way ``info`` fails this gate, in a stable order; empty when it passes."""
        found: list[str] = []
        if self.min_ir_version is not None and info.ir_version < self.min_ir_version:
            found.append(
                f"IR version: expected ≥ {self.min_ir_version}, the file says {info.ir_version}"
            )
        if self.min_opset is not None:
            defaults = [o.version for o in info.opsets if o.domain in DEFAULT_DOMAINS]
            if not defaults:
                imported = ", ".join(f"{o.domain}:{o.version}" for o in info.opsets) or "none"
                found.append(
                    f"opset: expected the default domain at ≥ {self.min_opset}, the file imports "
                    f"no default-domain opset (imports: {imported})"
                )
            elif len(defaults) > 1:
                found.append(
                    f"opset: the file imports the default domain {plural(len(defaults), 'time')} "
                    f"({', '.join(map(str, defaults))}); a model imports each domain once"
                )
            elif defaults[0] < self.min_opset:
                found.append(f"opset: expected ≥ {self.min_opset}, the file says {defaults[0]}")
        found += _io_violations(self.inputs, info.inputs, "input")
        found += _io_violations(self.outputs, info.outputs, "output")
        present = info.metadata_dict
        for key, value in self.metadata:
            if key not in present:
                found.append(f"metadata {key!r}: expected it present, the file has no such key")
            elif value is not None and present[key] != value:
                found.append(
                    f"metadata {key!r}: expected {value!r}, the file says {present[key]!r}"
                )
        return found

    def check(self, info: ModelInfo, *, component: str, form: str, file: str) -> None:
        """Raise a BinaryError listing every violation, or return when the model passes."""
        found = self.violations(info)
        if not found:
            return
        listing = "\n".join(f"  - {line}" for line in found)
        raise BinaryError(
            f"the {form} model of {component} fails its gate "
            f"({plural(len(found), 'problem')}):\n{listing}\n",
            component=component,
            file=file,
            fix="pin a model file that declares what the gate asks (re-export or convert it, "
            "e.g. to a higher opset), or, if the file is the right one, correct the gate in "
            "the recipe to what the file says",
        )


def _io_violations(
    gates: tuple[IOGate, ...] | None, specs: tuple[TensorSpec, ...], role: str
) -> list[str]:
    if gates is None:
        return []
    found: list[str] = []
    by_name = {s.name: s for s in specs}
    wanted = {g.name for g in gates}
    for gate in gates:
        spec = by_name.get(gate.name)
        if spec is None:
            names = ", ".join(repr(s.name) for s in specs) or "none"
            found.append(
                f"{role} {gate.name!r}: expected it, the file has no such {role} "
                f"(its {role}s: {names})"
            )
        else:
            found += gate.problems(spec, role)
    for spec in specs:
        if spec.name not in wanted:
            found.append(
                f"{role} {spec.name!r}: not in the gate, the file has it ({spec.describe()})"
            )
    return found


_GATE_KEYS = {"min_ir_version", "min_opset", "inputs", "outputs", "metadata"}


_IO_KEYS = {"name", "type", "shape"}


def _bad(where: str, what: str, fix: str) -> ConfigError:
    return ConfigError(f"{where}: {what}", fix=fix)


def _count(table: Mapping[str, Any], key: str, where: str) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if type(value) is not int or value < 1:
        raise _bad(where, f"{key} must be a positive integer, not {value!r}", f"e.g. {key} = 13")
    return value


def _io_gate(entry: Any, where: str) -> IOGate:
    if not isinstance(entry, Mapping):
        raise _bad(
            where,
            f"expected a table {{name, type, shape}}, not {entry!r}",
            'write { name = "images", type = "FLOAT", shape = [1, 3, 640, 640] }',
        )
    unknown = sorted(set(entry) - _IO_KEYS)
    if unknown:
        raise _bad(where, f"unknown key(s) {', '.join(unknown)}", "use only name, type and shape")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise _bad(where, "name must be a non-empty string", 'e.g. name = "images"')
    type_ = entry.get("type")
    if type_ is not None:
        if not isinstance(type_, str):
            raise _bad(where, f"type must be a string, not {type_!r}", 'e.g. type = "FLOAT"')
        if type_.upper() in DATA_TYPE_NAMES:
            type_ = type_.upper()
        elif not _TYPE_STRING.match(type_):
            raise _bad(
                where,
                f"type {type_!r} is neither an ONNX element type nor an ONNX type string",
                f"use one of {', '.join(sorted(DATA_TYPE_NAMES))}, or a type string such as "
                "seq(map(int64,tensor(float)))",
            )
    shape = entry.get("shape")
    dims: tuple[int | str, ...] | None = None
    if shape is not None:
        if not isinstance(shape, list | tuple):
            raise _bad(
                where, f"shape must be a list, not {shape!r}", 'e.g. shape = [1, 3, "h", "*"]'
            )
        for dim in shape:
            good = (type(dim) is int and dim >= 0) or (isinstance(dim, str) and dim)
            if not good:
                raise _bad(
                    where,
                    f"shape entry {dim!r} is neither a dimension (int ≥ 0), a symbolic name "
                    'nor "*"',
                    'e.g. shape = [1, 3, "height", "*"]',
                )
        dims = tuple(shape)
    return IOGate(name=name, type=type_, shape=dims)


def _io_gates(table: Mapping[str, Any], key: str, where: str) -> tuple[IOGate, ...] | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise _bad(where, f"{key} must be a list of tables", f'e.g. {key} = [{{ name = "x" }}]')
    gates = tuple(_io_gate(e, f"{where} {key}[{i}]") for i, e in enumerate(value))
    names = [g.name for g in gates]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _bad(where, f"{key} names {', '.join(twice)} more than once", "name each once")
    return gates


def _metadata_gate(value: Any, where: str) -> tuple[tuple[str, str | None], ...]:
    fix = 'write metadata = ["names", "task"] or metadata = { task = "detect", names = true }'
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        if not all(isinstance(k, str) and k for k in value):
            raise _bad(where, f"metadata keys must be non-empty strings, not {value!r}", fix)
        return tuple((k, None) for k in value)
    if isinstance(value, Mapping):
        entries: list[tuple[str, str | None]] = []
        for key, wanted in value.items():
            if wanted is True:
                entries.append((key, None))
            elif isinstance(wanted, str):
                entries.append((key, wanted))
            else:
                raise _bad(
                    where,
                    f"metadata {key!r} must be a string (the value required) or true (any "
                    f"value), not {wanted!r}",
                    fix,
                )
        return tuple(entries)
    raise _bad(where, f"metadata must be a list of keys or a table, not {value!r}", fix)


def gate_from_table(table: Mapping[str, Any], *, where: str) -> ModelGate:
    """Build a gate from its TOML table; ``where`` (file and table) names it in errors.

    ``min_ir_version`` and ``min_opset`` are positive integers; ``inputs`` and ``outputs`` lists
    of ``{name, type?, shape?}`` where a shape lists ints, symbolic dimension names and ``"*"``
    (any); ``metadata`` a list of required keys or a table of key = required value (or true for
    any value).
    """
    if not isinstance(table, Mapping):
        raise _bad(where, f"a model gate must be a table, not {table!r}", "write [gate] keys")
    unknown = sorted(set(table) - _GATE_KEYS)
    if unknown:
        raise _bad(
            where,
            f"unknown gate key(s) {', '.join(unknown)}",
            f"use only {', '.join(sorted(_GATE_KEYS))}",
        )
    return ModelGate(
        min_ir_version=_count(table, "min_ir_version", where),
        min_opset=_count(table, "min_opset", where),
        inputs=_io_gates(table, "inputs", where),
        outputs=_io_gates(table, "outputs", where),
        metadata=_metadata_gate(table.get("metadata"), where),
    )
