"""Build ONNX models by code: a tiny protobuf writer, independent of the reader it tests.

Field numbers are those of onnx/onnx.proto. Each function returns the serialized message, so a
test can splice in unknown fields, repeat a field, or cut the bytes anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5

ELEM = {
    "UNDEFINED": 0,
    "FLOAT": 1,
    "UINT8": 2,
    "INT8": 3,
    "UINT16": 4,
    "INT16": 5,
    "INT32": 6,
    "INT64": 7,
    "STRING": 8,
    "BOOL": 9,
    "FLOAT16": 10,
    "DOUBLE": 11,
    "BFLOAT16": 16,
}

Dim = int | str | None


def varint(value: int) -> bytes:
    """Base-128 varint; a negative value is written as its 64-bit two's complement."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def f_varint(number: int, value: int) -> bytes:
    return key(number, VARINT) + varint(value)


def f_bytes(number: int, data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return key(number, LEN) + varint(len(raw)) + raw


def f_fixed64(number: int, value: int = 0) -> bytes:
    return key(number, I64) + value.to_bytes(8, "little")


def f_fixed32(number: int, value: int = 0) -> bytes:
    return key(number, I32) + value.to_bytes(4, "little")


def messages(number: int, items: Iterable[bytes]) -> bytes:
    return b"".join(f_bytes(number, item) for item in items)


# --- onnx.proto messages ---------------------------------------------------------------------


def dimension(dim: Dim) -> bytes:
    if dim is None:
        return b""
    if isinstance(dim, int):
        return f_varint(1, dim)  # dim_value
    return f_bytes(2, dim)  # dim_param


def shape(dims: Sequence[Dim]) -> bytes:
    return messages(1, (dimension(d) for d in dims))


def tensor_type(elem: str | int, dims: Sequence[Dim] | None = None) -> bytes:
    """A TypeProto holding a Tensor (1): elem_type (1), shape (2)."""
    elem_type = ELEM[elem] if isinstance(elem, str) else elem
    body = f_varint(1, elem_type)
    if dims is not None:
        body += f_bytes(2, shape(dims))
    return f_bytes(1, body)


def sequence_type(element: bytes) -> bytes:
    return f_bytes(4, f_bytes(1, element))


def map_type(key_elem: str, value: bytes) -> bytes:
    return f_bytes(5, f_varint(1, ELEM[key_elem]) + f_bytes(2, value))


def optional_type(element: bytes) -> bytes:
    return f_bytes(9, f_bytes(1, element))


def value_info(name: str, type_proto: bytes | None = None, *, extra: bytes = b"") -> bytes:
    body = f_bytes(1, name)
    if type_proto is not None:
        body += f_bytes(2, type_proto)
    return body + extra


def tensor_value(name: str, elem: str | int, dims: Sequence[Dim] | None = None) -> bytes:
    return value_info(name, tensor_type(elem, dims))


def tensor(name: str, elem: str, dims: Sequence[int], raw: bytes = b"") -> bytes:
    """A TensorProto: dims (1, packed), data_type (2), name (8), raw_data (9)."""
    packed = b"".join(varint(d) for d in dims)
    body = f_bytes(1, packed) if dims else b""
    return body + f_varint(2, ELEM[elem]) + f_bytes(8, name) + f_bytes(9, raw)


def node(op_type: str, inputs: Sequence[str], outputs: Sequence[str], name: str = "") -> bytes:
    """A NodeProto: input (1), output (2), name (3), op_type (4)."""
    body = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    return body + f_bytes(3, name) + f_bytes(4, op_type)


def graph(
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    *,
    name: str = "main",
    nodes: Sequence[bytes] = (),
    initializers: Sequence[bytes] = (),
    extra: bytes = b"",
) -> bytes:
    """A GraphProto: node (1), name (2), initializer (5), input (11), output (12)."""
    return (
        messages(1, nodes)
        + f_bytes(2, name)
        + messages(5, initializers)
        + messages(11, inputs)
        + messages(12, outputs)
        + extra
    )


def opset_id(domain: str, version: int) -> bytes:
    return f_bytes(1, domain) + f_varint(2, version)


def entry(key_: str, value: str) -> bytes:
    return f_bytes(1, key_) + f_bytes(2, value)


def model(
    graph_proto: bytes | None,
    *,
    ir_version: int | None = 8,
    opsets: Sequence[tuple[str, int]] = (("", 13),),
    metadata: Sequence[tuple[str, str]] = (),
    producer_name: str = "ortbundle-tests",
    producer_version: str = "1.0",
    domain: str = "",
    model_version: int = 0,
    doc_string: str = "",
    extra: bytes = b"",
) -> bytes:
    """A ModelProto, fields in the order onnx writes them, then ``extra`` (e.g. unknown fields)."""
    body = b""
    if ir_version is not None:
        body += f_varint(1, ir_version)
    body += f_bytes(2, producer_name) + f_bytes(3, producer_version)
    if domain:
        body += f_bytes(4, domain)
    if model_version:
        body += f_varint(5, model_version)
    if doc_string:
        body += f_bytes(6, doc_string)
    if graph_proto is not None:
        body += f_bytes(7, graph_proto)
    body += messages(8, (opset_id(d, v) for d, v in opsets))
    body += messages(14, (entry(k, v) for k, v in metadata))
    return body + extra


ULTRALYTICS_METADATA = (
    ("description", "Ultralytics YOLO11n model"),
    ("author", "Ultralytics"),
    ("stride", "32"),
    ("task", "detect"),
    ("batch", "1"),
    ("imgsz", "[640, 640]"),
    ("names", "{0: 'person', 1: 'bicycle'}"),
    ("end2end", "True"),
)


def detector(
    *,
    opset: int = 13,
    ir_version: int = 8,
    metadata: Sequence[tuple[str, str]] = ULTRALYTICS_METADATA,
    weights: int = 1024,
) -> bytes:
    """An Ultralytics-like detector: images [1, 3, h, w] FLOAT → output0 [1, 300, 6] FLOAT."""
    conv = tensor("model.0.conv.weight", "FLOAT", [weights // 4], b"\x00" * weights)
    g = graph(
        [
            tensor_value("images", "FLOAT", [1, 3, "height", "width"]),
            tensor_value("model.0.conv.weight", "FLOAT", [weights // 4]),
        ],
        [tensor_value("output0", "FLOAT", [1, 300, 6])],
        name="main_graph",
        nodes=[node("Conv", ["images", "model.0.conv.weight"], ["output0"], "/model.0/Conv")],
        initializers=[conv],
    )
    return model(
        g,
        ir_version=ir_version,
        opsets=(("", opset),),
        metadata=metadata,
        producer_name="pytorch",
        producer_version="2.5.0",
    )
