"""Read what an ONNX model file declares, with the standard library only.

A model recipe says what its model should be (config/model_gates.py); the gate believes what
this reader finds in the file, not the recipe. The reader decodes just enough of the ONNX
protobuf (``onnx/onnx.proto``, proto2) to know the IR version, the opset imports, the graph's
inputs and outputs with their types and shapes, and the model's ``metadata_props``. It is a
wire-format reader of its own, not the ``onnx`` package:

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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ortbundle._core.errors import BinaryError
from ortbundle.config.model_gates import ModelInfo, Opset, TensorSpec, data_type_name

MAX_TYPE_DEPTH = 32  # TypeProto nests (seq of map of optional …); real models use 2 or 3 levels


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
