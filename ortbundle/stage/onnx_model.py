"""Read what an ONNX model file declares, and gate it on that, with the standard library only.

A model recipe says what its model should be; the gate believes the file, not the recipe. The
reader decodes just enough of the ONNX protobuf (``onnx/onnx.proto``, proto2) to know the IR
version, the opset imports, the graph's inputs and outputs with their types and shapes, and the
model's ``metadata_props``. It is a wire-format reader of its own, not the ``onnx`` package:

* a file is mapped with ``mmap`` and never copied; length-delimited fields that are not needed
  (nodes, initializer payloads, functions, training info) are stepped over by their length, so a
  model of hundreds of MB costs a walk over its field headers, not a read of its weights;
* every read is bounded by the enclosing message, never by the buffer alone, so a lying length
  stops the read instead of running into a neighbour or past the end;
* unknown fields of every wire type are skipped, as protobuf does, and a known field sent with
  another wire type is an unknown field too; groups (wire types 3 and 4) are refused: ONNX never
  uses them; nesting (``TypeProto`` is recursive) is bounded;
* an embedded message that appears more than once is merged, and a scalar that appears more than
  once keeps its last value, as protobuf parsers do;
* graph inputs that are initializers are left out of ``inputs``, as onnxruntime's
  ``get_inputs()`` does (at IR ≥ 4 they are overridable initializers, below it constants).

Anything that is not a readable model — truncated, garbage, no IR version or no graph — is a
``BinaryError`` naming the file, never a traceback.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ortbundle._core.errors import BinaryError, ConfigError

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

MAX_TYPE_DEPTH = 32  # TypeProto nests (seq of map of optional …); real models use 2 or 3 levels


def data_type_name(value: int) -> str:
    """The TensorProto.DataType name of an element type; ``UNKNOWN_<n>`` past the known ones."""
    return DATA_TYPES.get(value, f"UNKNOWN_{value}")


# --- the public model description -----------------------------------------------------------


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


# --- the wire format --------------------------------------------------------------------------

_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = 0, 1, 2, 3, 4, 5
_Buffer = bytes | mmap.mmap


class _Malformed(Exception):
    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


def _varint(buf: _Buffer, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    start = pos
    while True:
        if pos >= end:
            raise _Malformed("truncated varint", start)
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & 0xFFFF_FFFF_FFFF_FFFF, pos
        shift += 7
        if shift >= 70:
            raise _Malformed("varint longer than 10 bytes", start)


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _int32(value: int) -> int:
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _fields(buf: _Buffer, start: int, end: int, where: str) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, a, b): a varint's value in a; a length-delimited payload in [a, b).

    Fixed-width fields are stepped over and yielded with a = b = 0.
    """
    pos = start
    while pos < end:
        tag_at = pos
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0 or key > 0xFFFF_FFFF:
            raise _Malformed(f"invalid field tag {key} in {where}", tag_at)
        if wire == _VARINT:
            value, pos = _varint(buf, pos, end)
            yield number, wire, value, 0
        elif wire == _LEN:
            length, pos = _varint(buf, pos, end)
            if length > end - pos:
                raise _Malformed(
                    f"field {number} of {where} claims {length} bytes, only {end - pos} remain",
                    tag_at,
                )
            yield number, wire, pos, pos + length
            pos += length
        elif wire in (_I64, _I32):
            width = 8 if wire == _I64 else 4
            if width > end - pos:
                raise _Malformed(f"truncated {width * 8}-bit field {number} in {where}", tag_at)
            pos += width
            yield number, wire, 0, 0
        elif wire in (_SGROUP, _EGROUP):
            raise _Malformed(f"protobuf group (field {number}) in {where}: ONNX has none", tag_at)
        else:
            raise _Malformed(f"invalid wire type {wire} (field {number}) in {where}", tag_at)


def _text(buf: _Buffer, start: int, end: int) -> str:
    # proto2 strings are not checked for UTF-8 by protobuf either; keep every byte visible
    return bytes(buf[start:end]).decode("utf-8", errors="backslashreplace")


# --- accumulators: protobuf merges repeated occurrences of a message field ---------------------


@dataclass
class _Dim:
    value: int | str | None = None


@dataclass
class _Type:
    kind: str = ""
    elem_type: int = 0  # tensor / sparse_tensor element type, map key type
    shape: list[_Dim] | None = None
    inner: _Type | None = None  # sequence / optional element, map value
    opaque_domain: str = ""
    opaque_name: str = ""


@dataclass
class _Value:
    name: str = ""
    type: _Type | None = None


@dataclass
class _Graph:
    name: str = ""
    inputs: list[_Value] = field(default_factory=list)
    outputs: list[_Value] = field(default_factory=list)
    initializers: set[str] = field(default_factory=set)


@dataclass
class _Model:
    ir_version: int | None = None
    producer_name: str = ""
    producer_version: str = ""
    domain: str = ""
    model_version: int = 0
    doc_string: str = ""
    graph: _Graph | None = None
    opsets: list[Opset] = field(default_factory=list)
    metadata: list[tuple[str, str]] = field(default_factory=list)


_TYPE_MEMBERS = {
    1: "tensor",
    4: "sequence",
    5: "map",
    9: "optional",
    8: "sparse_tensor",
    7: "opaque",
}


def _parse_shape(buf: _Buffer, start: int, end: int, dims: list[_Dim]) -> None:
    for number, wire, a, b in _fields(buf, start, end, "TensorShapeProto"):
        if number == 1 and wire == _LEN:
            dim = _Dim()
            for n, w, x, y in _fields(buf, a, b, "TensorShapeProto.Dimension"):
                if n == 1 and w == _VARINT:
                    dim.value = _int64(x)
                elif n == 2 and w == _LEN:
                    dim.value = _text(buf, x, y)
            dims.append(dim)


def _parse_type(buf: _Buffer, start: int, end: int, into: _Type, depth: int) -> None:
    if depth > MAX_TYPE_DEPTH:
        raise _Malformed(f"TypeProto nested deeper than {MAX_TYPE_DEPTH}", start)
    for number, wire, a, b in _fields(buf, start, end, "TypeProto"):
        kind = _TYPE_MEMBERS.get(number)
        if kind is None or wire != _LEN:
            continue  # denotation (6) and unknown fields
        if into.kind != kind:  # a oneof member replaces the one set before it
            into.kind, into.elem_type, into.shape, into.inner = kind, 0, None, None
            into.opaque_domain = into.opaque_name = ""
        for n, w, x, y in _fields(buf, a, b, f"TypeProto.{kind}"):
            if kind in ("tensor", "sparse_tensor"):
                if n == 1 and w == _VARINT:
                    into.elem_type = _int32(x)
                elif n == 2 and w == _LEN:
                    if into.shape is None:
                        into.shape = []
                    _parse_shape(buf, x, y, into.shape)
            elif kind == "map" and n == 1 and w == _VARINT:
                into.elem_type = _int32(x)
            elif kind == "opaque" and w == _LEN and n in (1, 2):
                if n == 1:
                    into.opaque_domain = _text(buf, x, y)
                else:
                    into.opaque_name = _text(buf, x, y)
            elif (kind, n) in (("sequence", 1), ("optional", 1), ("map", 2)) and w == _LEN:
                if into.inner is None:
                    into.inner = _Type()
                _parse_type(buf, x, y, into.inner, depth + 1)


def _parse_value(buf: _Buffer, start: int, end: int, where: str) -> _Value:
    value = _Value()
    for number, wire, a, b in _fields(buf, start, end, where):
        if number == 1 and wire == _LEN:
            value.name = _text(buf, a, b)
        elif number == 2 and wire == _LEN:
            if value.type is None:
                value.type = _Type()
            _parse_type(buf, a, b, value.type, 1)
    return value


def _tensor_name(buf: _Buffer, start: int, end: int) -> str:
    name = ""
    for number, wire, a, b in _fields(buf, start, end, "TensorProto"):
        if number == 8 and wire == _LEN:  # raw_data and the typed data are stepped over
            name = _text(buf, a, b)
    return name


def _parse_graph(buf: _Buffer, start: int, end: int, graph: _Graph) -> None:
    for number, wire, a, b in _fields(buf, start, end, "GraphProto"):
        if wire != _LEN:
            continue
        if number == 2:
            graph.name = _text(buf, a, b)
        elif number == 11:
            graph.inputs.append(_parse_value(buf, a, b, "GraphProto.input"))
        elif number == 12:
            graph.outputs.append(_parse_value(buf, a, b, "GraphProto.output"))
        elif number == 5:
            graph.initializers.add(_tensor_name(buf, a, b))
        elif number == 15:  # SparseTensorProto: its name is that of its values (1)
            values = ""
            for n, w, x, y in _fields(buf, a, b, "SparseTensorProto"):
                if n == 1 and w == _LEN:
                    values = _tensor_name(buf, x, y)
            graph.initializers.add(values)


def _parse_model(buf: _Buffer, start: int, end: int) -> _Model:
    model = _Model()
    for number, wire, a, b in _fields(buf, start, end, "ModelProto"):
        if wire == _VARINT:
            if number == 1:
                model.ir_version = _int64(a)
            elif number == 5:
                model.model_version = _int64(a)
        elif wire == _LEN:
            if number == 2:
                model.producer_name = _text(buf, a, b)
            elif number == 3:
                model.producer_version = _text(buf, a, b)
            elif number == 4:
                model.domain = _text(buf, a, b)
            elif number == 6:
                model.doc_string = _text(buf, a, b)
            elif number == 7:
                if model.graph is None:
                    model.graph = _Graph()
                _parse_graph(buf, a, b, model.graph)
            elif number == 8:
                domain, version = "", 0
                for n, w, x, y in _fields(buf, a, b, "OperatorSetIdProto"):
                    if n == 1 and w == _LEN:
                        domain = _text(buf, x, y)
                    elif n == 2 and w == _VARINT:
                        version = _int64(x)
                model.opsets.append(Opset(domain, version))
            elif number == 14:
                key = value = ""
                for n, w, x, y in _fields(buf, a, b, "StringStringEntryProto"):
                    if n == 1 and w == _LEN:
                        key = _text(buf, x, y)
                    elif n == 2 and w == _LEN:
                        value = _text(buf, x, y)
                model.metadata.append((key, value))
    return model


# --- from the accumulators to the public description -------------------------------------------


def _type_string(t: _Type) -> str:
    if t.kind in ("tensor", "sparse_tensor"):
        return f"{t.kind}({data_type_name(t.elem_type).lower()})"
    inner = _type_string(t.inner) if t.inner is not None else ""
    if t.kind == "sequence":
        return f"seq({inner})"
    if t.kind == "optional":
        return f"optional({inner})"
    if t.kind == "map":
        return f"map({data_type_name(t.elem_type).lower()},{inner})"
    if t.kind == "opaque":
        return f"opaque({t.opaque_domain},{t.opaque_name})"
    return ""


def _spec(value: _Value) -> TensorSpec:
    t = value.type or _Type()
    tensor = t.kind in ("tensor", "sparse_tensor")
    shape = None
    if tensor and t.shape is not None:
        shape = tuple(d.value for d in t.shape)
    return TensorSpec(
        name=value.name,
        elem_type=data_type_name(t.elem_type) if tensor else "",
        shape=shape,
        kind=t.kind,
        type_string=_type_string(t),
    )


def _info(model: _Model, name: str) -> ModelInfo:
    if model.ir_version is None or model.graph is None:
        missing = " and ".join(
            what
            for what, absent in (
                ("ir_version", model.ir_version is None),
                ("graph", model.graph is None),
            )
            if absent
        )
        raise BinaryError(
            f"not an ONNX model: no {missing} (a ModelProto always has both)",
            file=name,
            fix="check that the file is the .onnx model itself, not a zip, an external-data "
            "file or a download error page; re-download it",
        )
    graph = model.graph
    return ModelInfo(
        ir_version=model.ir_version,
        producer_name=model.producer_name,
        producer_version=model.producer_version,
        domain=model.domain,
        model_version=model.model_version,
        opsets=tuple(model.opsets),
        inputs=tuple(_spec(v) for v in graph.inputs if v.name not in graph.initializers),
        outputs=tuple(_spec(v) for v in graph.outputs),
        metadata=tuple(model.metadata),
        graph_name=graph.name,
        doc_string=model.doc_string,
    )


def _read(buf: _Buffer, size: int, name: str) -> ModelInfo:
    if size == 0:
        raise BinaryError(
            "not an ONNX model: the file is empty",
            file=name,
            fix="re-download or re-export the model",
        )
    try:
        model = _parse_model(buf, 0, size)
    except _Malformed as bad:
        raise BinaryError(
            f"not a readable ONNX model: {bad.reason} (byte {bad.offset} of {size})",
            file=name,
            fix="the file is truncated or corrupt, or not an ONNX model: re-download or "
            "re-export it and check its SHA-256 against the recipe's pin",
        ) from None
    return _info(model, name)


def read_model_bytes(data: bytes, *, name: str) -> ModelInfo:
    """Describe a serialized ModelProto; ``name`` names it in errors."""
    return _read(bytes(data), len(data), name)


def read_model(path: Path) -> ModelInfo:
    """Describe the ONNX model at ``path``, mapping the file rather than reading it."""
    try:
        with path.open("rb") as stream:
            size = stream.seek(0, 2)
            if size == 0:
                return _read(b"", 0, str(path))
            with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                return _read(mapped, size, str(path))
    except OSError as error:
        raise BinaryError(
            f"cannot read the ONNX model: {error.strerror or error}",
            file=str(path),
            fix="check that the file exists and is readable",
        ) from None


# --- gates ---------------------------------------------------------------------------------------

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
                    f"opset: the file imports the default domain {len(defaults)} times "
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
            f"({len(found)} problem{'s' if len(found) > 1 else ''}):\n{listing}\n",
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


# --- gates from TOML ---------------------------------------------------------------------------

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
