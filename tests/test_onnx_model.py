"""The ONNX model reader and the model gates.

Models are built by code (tests/helpers/onnx_models.py writes the protobuf itself), checked
against the ``onnx`` package where it is installed, and read from the real ORT wheel's datasets.
"""

from __future__ import annotations

import importlib
import os
import time
import tomllib
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ortbundle._core.errors import BinaryError, ConfigError
from ortbundle.config.model_gates import (
    DATA_TYPES,
    IOGate,
    ModelGate,
    ModelInfo,
    Opset,
    TensorSpec,
    gate_from_table,
)
from ortbundle.stage.onnx_model import MAX_TYPE_DEPTH, read_model, read_model_bytes
from tests.helpers import onnx_models as pb

try:
    import onnx
    from onnx import TensorProto, helper

    # protobuf ships no type stubs: take its parse error by name
    DecodeError: type[Exception] = importlib.import_module("google.protobuf.message").DecodeError
except ImportError:  # the cross-checks below skip; everything else runs without it
    HAVE_ONNX = False
else:
    HAVE_ONNX = True

needs_onnx = pytest.mark.skipif(
    not HAVE_ONNX,
    reason="the onnx package is not installed (it is in requirements-dev.txt): "
    "the cross-check against the reference protobuf reader is skipped",
)

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)

WEBGPU_WHEEL_SHA256 = "142eb8bdb803c58117bf64164d201f43180bc87229cac14b590aa4ea79e0f70b"


def read(data: bytes) -> ModelInfo:
    return read_model_bytes(data, name="model.onnx")


def refused(data: bytes) -> BinaryError:
    with pytest.raises(BinaryError) as caught:
        read(data)
    assert caught.value.file == "model.onnx"
    assert "model.onnx" in str(caught.value)
    return caught.value


# --- reading -------------------------------------------------------------------------------------


def test_reads_an_ultralytics_like_detector() -> None:
    info = read(pb.detector())
    assert info.ir_version == 8
    assert (info.producer_name, info.producer_version) == ("pytorch", "2.5.0")
    assert info.opsets == (Opset("", 13),)
    assert info.opset() == info.opset("ai.onnx") == 13
    assert info.opset("com.microsoft") is None
    assert info.graph_name == "main_graph"
    # the initializer listed as an input is not an input, as in onnxruntime's get_inputs()
    assert info.inputs == (
        TensorSpec("images", "FLOAT", (1, 3, "height", "width"), "tensor", "tensor(float)"),
    )
    assert info.outputs == (TensorSpec("output0", "FLOAT", (1, 300, 6), "tensor", "tensor(float)"),)
    assert info.metadata == pb.ULTRALYTICS_METADATA  # in file order
    meta = info.metadata_dict
    assert meta["names"] == "{0: 'person', 1: 'bicycle'}"
    assert (meta["task"], meta["end2end"]) == ("detect", "True")


def test_read_model_maps_the_file_and_agrees_with_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "yolo.onnx"
    path.write_bytes(pb.detector())
    assert read_model(path) == read_model_bytes(pb.detector(), name="x")


def test_every_tensor_type_and_its_name() -> None:
    assert DATA_TYPES[1] == "FLOAT" and DATA_TYPES[10] == "FLOAT16" and DATA_TYPES[16] == "BFLOAT16"
    assert len(DATA_TYPES) == 29 and sorted(DATA_TYPES) == list(range(29))
    inputs = [pb.tensor_value(f"in{n}", n, [n]) for n in DATA_TYPES] + [
        pb.tensor_value("future", 99, [])
    ]
    info = read(pb.model(pb.graph(inputs, [])))
    assert [s.elem_type for s in info.inputs] == [*DATA_TYPES.values(), "UNKNOWN_99"]
    assert info.inputs[-1].shape == ()  # a scalar: a shape with no dimensions
    assert info.inputs[2].onnx_type == "tensor(uint8)"


def test_dimensions_symbolic_unknown_negative_and_no_shape() -> None:
    value = pb.tensor_value("x", "FLOAT16", ["batch", None, 3, -1, 0])
    no_shape = pb.tensor_value("y", "INT64")
    info = read(pb.model(pb.graph([value, no_shape], [])))
    assert info.inputs[0].shape == ("batch", None, 3, -1, 0)
    assert info.inputs[1].shape is None
    assert info.inputs[0].describe() == "x: tensor(float16) [batch, ?, 3, -1, 0]"


def test_non_tensor_types() -> None:
    probabilities = pb.sequence_type(pb.map_type("INT64", pb.tensor_type("FLOAT")))
    sparse = pb.f_bytes(8, pb.f_varint(1, 1) + pb.f_bytes(2, pb.shape([10, 10])))
    opaque = pb.f_bytes(7, pb.f_bytes(1, "com.example") + pb.f_bytes(2, "Blob"))
    outputs = [
        pb.value_info("probabilities", probabilities),
        pb.value_info("maybe", pb.optional_type(pb.tensor_type("INT8", [2]))),
        pb.value_info("sparse", sparse),
        pb.value_info("blob", opaque),
        pb.value_info("untyped"),
    ]
    specs = read(pb.model(pb.graph([], outputs))).outputs
    assert [(s.kind, s.elem_type, s.shape, s.onnx_type) for s in specs] == [
        ("sequence", "", None, "seq(map(int64,tensor(float)))"),
        ("optional", "", None, "optional(tensor(int8))"),
        ("sparse_tensor", "FLOAT", (10, 10), "sparse_tensor(float)"),
        ("opaque", "", None, "opaque(com.example,Blob)"),
        ("", "", None, ""),
    ]


def test_sparse_initializers_are_not_inputs() -> None:
    values = pb.tensor("S", "FLOAT", [2], b"\x00" * 8)
    sparse = (
        pb.f_bytes(1, values) + pb.f_bytes(2, pb.tensor("", "INT64", [2])) + pb.f_bytes(3, b"\x04")
    )
    g = pb.graph([pb.tensor_value("X", "FLOAT"), pb.tensor_value("S", "FLOAT")], [])
    g += pb.f_bytes(15, sparse)
    assert [s.name for s in read(pb.model(g)).inputs] == ["X"]


def test_ir_version_below_4_still_leaves_initializers_out() -> None:
    # onnxruntime's get_inputs() leaves them out at every IR version (at IR < 4 they are constants)
    info = read(pb.detector(ir_version=3))
    assert [s.name for s in info.inputs] == ["images"]


def test_unknown_fields_of_every_wire_type_are_skipped_at_every_level() -> None:
    def unknown(number: int) -> bytes:
        return (
            pb.f_varint(number, 2**63 + 5)
            + pb.f_fixed64(number + 1, 2**64 - 1)
            + pb.f_bytes(number + 2, b"\xff" * 300)  # not a message, not UTF-8: never parsed
            + pb.f_fixed32(number + 3, 7)
        )

    dims = pb.messages(1, [pb.dimension(1) + unknown(10), pb.dimension("n") + unknown(10)])
    tensor = pb.f_varint(1, 1) + unknown(10) + pb.f_bytes(2, dims + unknown(10))
    type_proto = pb.f_bytes(1, tensor) + unknown(20) + pb.f_bytes(6, "IMAGE")  # denotation
    value = pb.value_info("x", type_proto, extra=unknown(10) + pb.f_bytes(3, "doc"))
    g = pb.graph([value], [pb.tensor_value("y", "FLOAT")], extra=unknown(100))
    opset = pb.opset_id("", 17) + unknown(10)
    meta = pb.entry("k", "v") + unknown(10)
    data = (
        pb.model(g, opsets=(), extra=pb.f_bytes(8, opset) + pb.f_bytes(14, meta))
        + unknown(100)
        + unknown(2**29 - 4)  # the highest field numbers
    )
    info = read(data)
    assert info.inputs == (TensorSpec("x", "FLOAT", (1, "n"), "tensor", "tensor(float)"),)
    assert info.opsets == (Opset("", 17),)
    assert info.metadata == (("k", "v"),)


def test_a_known_field_with_another_wire_type_is_an_unknown_field() -> None:
    data = pb.model(pb.graph([], []), ir_version=7) + pb.f_bytes(1, b"\x08\x09") + pb.f_fixed32(7)
    info = read(data)
    assert info.ir_version == 7
    assert info.graph_name == "main"


def test_repeated_scalars_keep_the_last_and_repeated_messages_merge() -> None:
    first = pb.graph([pb.tensor_value("a", "FLOAT")], [], name="first")
    second = pb.graph([pb.value_info("b", pb.tensor_type("INT8", [1]))], [], name="second")
    # the type of b arrives twice: its tensor merges, its shape's dims accumulate
    again = pb.f_bytes(11, pb.f_bytes(2, pb.f_bytes(1, pb.f_bytes(2, pb.shape(["n"])))))
    data = pb.model(first, ir_version=4) + pb.f_bytes(7, second) + pb.f_varint(1, 9)
    data += pb.f_bytes(7, again) + pb.f_bytes(2, "last producer")
    info = read(data)
    assert info.ir_version == 9
    assert info.producer_name == "last producer"
    assert info.graph_name == "second"
    assert [(s.name, s.shape) for s in info.inputs] == [("a", None), ("b", (1,)), ("", ("n",))]


def test_a_oneof_member_replaces_the_one_before_it() -> None:
    type_proto = pb.tensor_type("FLOAT", [1]) + pb.sequence_type(pb.tensor_type("INT8"))
    type_proto += pb.tensor_type("INT64")
    dim = pb.f_varint(1, 5) + pb.f_bytes(2, "n") + pb.f_varint(1, 6)
    value = pb.value_info("x", type_proto) + pb.f_bytes(
        2, pb.f_bytes(1, pb.f_bytes(2, pb.f_bytes(1, dim)))
    )
    (spec,) = read(pb.model(pb.graph([value], []))).inputs
    assert (spec.kind, spec.elem_type, spec.shape) == ("tensor", "INT64", (6,))


def test_large_skipped_payloads_are_neither_read_into_memory_nor_copied(tmp_path: Path) -> None:
    weights = 64 << 20
    path = tmp_path / "big.onnx"
    path.write_bytes(pb.detector(weights=weights))
    assert path.stat().st_size > weights
    tracemalloc.start()
    try:
        started = time.perf_counter()
        info = read_model(path)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [s.name for s in info.inputs] == ["images"]
    assert peak < 1 << 20, f"reading a {weights >> 20} MiB model allocated {peak} bytes"
    assert elapsed < 2.0


def test_many_nodes_and_initializers_read_quickly() -> None:
    count = 20_000
    nodes = [pb.node("Relu", [f"t{i}"], [f"t{i + 1}"], f"relu{i}") for i in range(count)]
    inits = [pb.tensor(f"w{i}", "FLOAT", [4], b"\x00" * 16) for i in range(count)]
    g = pb.graph([pb.tensor_value("t0", "FLOAT")], [], nodes=nodes, initializers=inits)
    started = time.perf_counter()
    info = read(pb.model(g))
    assert time.perf_counter() - started < 5.0
    assert [s.name for s in info.inputs] == ["t0"]


def test_type_nesting_is_bounded() -> None:
    def nested(depth: int) -> bytes:
        type_proto = pb.tensor_type("FLOAT")
        for _ in range(depth - 1):
            type_proto = pb.sequence_type(type_proto)
        return pb.model(pb.graph([pb.value_info("x", type_proto)], []))

    deepest = read(nested(MAX_TYPE_DEPTH)).inputs[0].onnx_type
    assert deepest == "seq(" * (MAX_TYPE_DEPTH - 1) + "tensor(float)" + ")" * (MAX_TYPE_DEPTH - 1)
    assert "nested deeper" in str(refused(nested(MAX_TYPE_DEPTH + 1)))
    assert "nested deeper" in str(refused(nested(5000)))  # no RecursionError


# --- refusing what is not a model ------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "empty"),
        (b"<html><body>404 Not Found</body></html>", "not"),
        (b"PK\x03\x04" + b"\x00" * 40, "not"),
        (pb.model(None), "no graph"),
        (pb.model(pb.graph([], []), ir_version=None), "no ir_version"),
        (b"\x08", "truncated varint"),
        (b"\x08" + b"\xff" * 10 + b"\x01", "longer than 10 bytes"),
        (b"\x09\x00\x00", "truncated 64-bit"),
        (b"\x0d\x00", "truncated 32-bit"),
        (b"\x3a\x05ab", "claims 5 bytes, only 2 remain"),
        (b"\x3a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "claims"),
        (b"\x0b\x0c", "group"),
        (b"\x0c", "group"),
        (b"\x0e", "wire type 6"),
        (b"\x0f", "wire type 7"),
        (b"\x00\x00", "invalid field tag 0"),
        (b"\x80\x80\x80\x80\x80\x01", "invalid field tag"),
    ],
)
def test_not_a_model_is_refused_with_the_file_named(data: bytes, says: str) -> None:
    error = refused(data)
    assert says in str(error)
    assert error.fix
    assert error.exit_code == 7


def test_a_length_is_bounded_by_its_message_not_by_the_buffer() -> None:
    # the graph is 5 bytes; inside it an input claims 40, which the file has, past the graph
    inner = pb.key(11, pb.LEN) + bytes([40]) + b"\x0a\x01x"
    data = pb.f_varint(1, 8) + pb.key(7, pb.LEN) + bytes([len(inner)]) + inner + b"\x00" * 64
    assert "field 11 of GraphProto claims 40 bytes, only 3 remain" in str(refused(data))


def test_every_truncation_is_refused_until_the_graph_is_whole() -> None:
    data = pb.detector()
    graph_end = data.index(pb.f_bytes(8, pb.opset_id("", 13)))
    read_at = []
    for cut in range(len(data) + 1):
        try:
            info = read(data[:cut])
        except BinaryError:
            continue
        assert cut >= graph_end, f"a model cut at byte {cut} of {len(data)} was read"
        assert [s.name for s in info.inputs] == ["images"]
        read_at.append(cut)
    assert read_at[0] == graph_end and read_at[-1] == len(data), read_at


def test_a_missing_or_unreadable_file_is_a_binary_error(tmp_path: Path) -> None:
    with pytest.raises(BinaryError, match="cannot read") as caught:
        read_model(tmp_path / "absent.onnx")
    assert caught.value.file == str(tmp_path / "absent.onnx")
    with pytest.raises(BinaryError, match="cannot read"):
        read_model(tmp_path)  # a directory
    empty = tmp_path / "empty.onnx"
    empty.touch()
    with pytest.raises(BinaryError, match="empty"):
        read_model(empty)


@FUZZ
@given(st.binary(max_size=512))
@example(b"\x08\x08\x3a\x00")
@example(pb.model(pb.graph([], [])))
def test_random_bytes_read_or_refuse(data: bytes) -> None:
    try:
        read(data)
    except BinaryError as error:
        assert error.file == "model.onnx"


@FUZZ
@given(st.data())
def test_damaged_models_read_or_refuse(data: st.DataObject) -> None:
    try:
        read(damage(bytearray(pb.detector(weights=64)), data))
    except BinaryError as error:
        assert error.file == "model.onnx"


def damage(model: bytearray, data: st.DataObject) -> bytes:
    """Overwrite, insert and delete a few bytes anywhere."""
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(model) - 1))
        action = data.draw(st.sampled_from(["set", "insert", "delete"]))
        if action == "set":
            model[at] = data.draw(st.integers(0, 255))
        elif action == "insert":
            model[at:at] = data.draw(st.binary(min_size=1, max_size=12))
        else:
            del model[at : at + data.draw(st.integers(1, 12))]
    return bytes(model)


# --- cross-check against the onnx package ------------------------------------------------------

ONNX_KINDS = {
    "tensor_type": "tensor",
    "sparse_tensor_type": "sparse_tensor",
    "sequence_type": "sequence",
    "map_type": "map",
    "optional_type": "optional",
    "opaque_type": "opaque",
}


def text(value: str | bytes) -> str:
    """onnx hands back bytes for a proto2 string that is not UTF-8; the reader shows escapes."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


def onnx_elem(value: int) -> str:
    """onnx's name of an element type; this reader's UNKNOWN_<n> past the known ones."""
    known = dict(TensorProto.DataType.items())
    return next((k for k, v in known.items() if v == value), f"UNKNOWN_{value}")


def onnx_type_string(t: Any) -> str:
    member = t.WhichOneof("value")
    if member in ("tensor_type", "sparse_tensor_type"):
        elem = onnx_elem(
            t.tensor_type.elem_type if member == "tensor_type" else t.sparse_tensor_type.elem_type
        )
        return f"{ONNX_KINDS[member]}({elem.lower()})"
    if member == "sequence_type":
        return f"seq({onnx_type_string(t.sequence_type.elem_type)})"
    if member == "optional_type":
        return f"optional({onnx_type_string(t.optional_type.elem_type)})"
    if member == "map_type":
        key = onnx_elem(t.map_type.key_type).lower()
        return f"map({key},{onnx_type_string(t.map_type.value_type)})"
    if member == "opaque_type":
        return f"opaque({text(t.opaque_type.domain)},{text(t.opaque_type.name)})"
    return ""


def onnx_spec(value: Any) -> TensorSpec:
    """What the reference implementation says of one ValueInfoProto, as a TensorSpec."""
    t = value.type
    member = t.WhichOneof("value") if value.HasField("type") else None
    if member not in ("tensor_type", "sparse_tensor_type"):
        kind = ONNX_KINDS.get(member or "", "")
        return TensorSpec(text(value.name), "", None, kind, onnx_type_string(t) if member else "")
    tensor = getattr(t, member)
    shape = None
    if tensor.HasField("shape"):
        shape = tuple(
            d.dim_value
            if d.WhichOneof("value") == "dim_value"
            else text(d.dim_param)
            if d.WhichOneof("value") == "dim_param"
            else None
            for d in tensor.shape.dim
        )
    return TensorSpec(
        text(value.name),
        onnx_elem(tensor.elem_type),
        shape,
        ONNX_KINDS[member],
        onnx_type_string(t),
    )


def onnx_says(data: bytes) -> ModelInfo:
    m = onnx.ModelProto.FromString(data)
    g = m.graph
    initializers = {text(t.name) for t in g.initializer}
    initializers |= {text(s.values.name) for s in g.sparse_initializer}
    return ModelInfo(
        ir_version=m.ir_version,
        producer_name=text(m.producer_name),
        producer_version=text(m.producer_version),
        domain=text(m.domain),
        model_version=m.model_version,
        opsets=tuple(Opset(text(o.domain), o.version) for o in m.opset_import),
        inputs=tuple(onnx_spec(v) for v in g.input if text(v.name) not in initializers),
        outputs=tuple(onnx_spec(v) for v in g.output),
        metadata=tuple((text(p.key), text(p.value)) for p in m.metadata_props),
        graph_name=text(g.name),
        doc_string=text(m.doc_string),
    )


@needs_onnx
def test_data_types_are_those_of_onnx() -> None:
    assert {v: k for k, v in TensorProto.DataType.items()} == DATA_TYPES


@needs_onnx
def test_agrees_with_onnx_on_a_model_made_by_onnx_helper() -> None:
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, "h", "w"])
    w = helper.make_tensor_value_info("W", TensorProto.FLOAT, [3])
    unknown = helper.make_tensor_value_info("mask", TensorProto.BOOL, None)
    y = helper.make_tensor_value_info("output0", TensorProto.FLOAT16, ["batch", 300, 6])
    seq = helper.make_value_info(
        "probs",
        helper.make_sequence_type_proto(
            helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(1, None))
        ),
    )
    init = helper.make_tensor("W", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    node = helper.make_node("Add", ["images", "W"], ["output0"])
    graph = helper.make_graph([node], "g", [x, w, unknown], [y, seq], [init])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 3)],
        producer_name="onnx-helper",
        ir_version=8,
        doc_string="a doc",
    )
    helper.set_model_props(
        model, {"names": "{0: 'person', 1: 'bicycle'}", "task": "detect", "end2end": "True"}
    )
    model.model_version = 3
    model.domain = "ai.example"
    data = model.SerializeToString()
    info = read(data)
    assert info == onnx_says(data)
    assert [s.name for s in info.inputs] == ["images", "mask"]
    assert info.inputs[0].shape == ("batch", 3, "h", "w")
    assert info.inputs[1].shape is None
    assert info.opsets == (Opset("", 13), Opset("ai.onnx.ml", 3))
    assert info.metadata_dict["end2end"] == "True"
    assert (info.model_version, info.domain, info.doc_string) == (3, "ai.example", "a doc")


# structured random models: every field kind, unknown fields, repeats, in any mix

TEXT = st.text(max_size=8)
INT64 = st.integers(-(2**63), 2**63 - 1)
# field numbers no ONNX message uses
UNUSED = st.integers(50, 2**29 - 1)


@st.composite
def unknown_fields(draw: st.DrawFn, mismatched: dict[int, int]) -> bytes:
    """Fields the reader must step over: unused numbers, or used ones under another wire type."""
    out = b""
    for _ in range(draw(st.integers(0, 2))):
        if draw(st.booleans()) and mismatched:
            number = draw(st.sampled_from(sorted(mismatched)))
            wire = draw(st.sampled_from([w for w in (0, 1, 2, 5) if w != mismatched[number]]))
        else:
            number = draw(UNUSED)
            wire = draw(st.sampled_from([0, 1, 2, 5]))
        if wire == 0:
            out += pb.f_varint(number, draw(INT64))
        elif wire == 1:
            out += pb.f_fixed64(number, draw(st.integers(0, 2**64 - 1)))
        elif wire == 5:
            out += pb.f_fixed32(number, draw(st.integers(0, 2**32 - 1)))
        else:
            out += pb.f_bytes(number, draw(st.binary(max_size=20)))
    return out


@st.composite
def type_protos(draw: st.DrawFn, depth: int = 0) -> bytes:
    choice = draw(
        st.sampled_from(
            ["tensor", "sparse", "seq", "map", "opt", "opaque", "empty"]
            if depth < 3
            else ["tensor", "empty"]
        )
    )
    extra = draw(unknown_fields({1: 2, 4: 2, 5: 2, 6: 2, 7: 2, 8: 2, 9: 2}))
    if choice in ("tensor", "sparse"):
        body = pb.f_varint(1, draw(st.integers(-3, 40)))
        if draw(st.booleans()):
            dims = draw(st.lists(st.one_of(INT64, TEXT, st.none()), max_size=5))
            body += pb.f_bytes(2, pb.shape(dims) + draw(unknown_fields({1: 2})))
        body += draw(unknown_fields({1: 0, 2: 2}))
        return pb.f_bytes(1 if choice == "tensor" else 8, body) + extra
    if choice == "seq":
        return pb.f_bytes(4, pb.f_bytes(1, draw(type_protos(depth + 1)))) + extra
    if choice == "opt":
        return pb.f_bytes(9, pb.f_bytes(1, draw(type_protos(depth + 1)))) + extra
    if choice == "map":
        body = pb.f_varint(1, draw(st.integers(0, 30))) + pb.f_bytes(
            2, draw(type_protos(depth + 1))
        )
        return pb.f_bytes(5, body) + extra
    if choice == "opaque":
        return pb.f_bytes(7, pb.f_bytes(1, draw(TEXT)) + pb.f_bytes(2, draw(TEXT))) + extra
    return extra


@st.composite
def value_infos(draw: st.DrawFn, names: st.SearchStrategy[str]) -> bytes:
    type_proto = draw(st.none() | type_protos())
    return pb.value_info(draw(names), type_proto, extra=draw(unknown_fields({1: 2, 2: 2, 3: 2})))


@st.composite
def random_models(draw: st.DrawFn) -> bytes:
    names = st.sampled_from(["x", "y", "w", "b", ""]) | TEXT
    graph_parts = []
    for _ in range(draw(st.integers(1, 2))):  # a graph given twice merges
        inits = [
            pb.tensor(draw(names), "FLOAT", [1], b"\x00" * 4)
            for _ in range(draw(st.integers(0, 2)))
        ]
        graph_parts.append(
            pb.graph(
                draw(st.lists(value_infos(names), max_size=4)),
                draw(st.lists(value_infos(names), max_size=3)),
                name=draw(TEXT),
                initializers=inits,
                nodes=[pb.node("Identity", ["x"], ["y"])] * draw(st.integers(0, 2)),
                extra=draw(unknown_fields({1: 2, 2: 2, 5: 2, 10: 2, 11: 2, 12: 2})),
            )
        )
    data = pb.model(
        graph_parts[0],
        ir_version=draw(INT64),
        opsets=draw(
            st.lists(
                st.tuples(st.sampled_from(["", "ai.onnx", "ai.onnx.ml"]) | TEXT, INT64), max_size=3
            )
        ),
        metadata=draw(st.lists(st.tuples(TEXT, TEXT), max_size=3)),
        producer_name=draw(TEXT),
        producer_version=draw(TEXT),
        domain=draw(TEXT),
        model_version=draw(INT64),
        doc_string=draw(TEXT),
        extra=draw(unknown_fields({1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2})),
    )
    for part in graph_parts[1:]:
        data += pb.f_bytes(7, part)
    if draw(st.booleans()):
        data += pb.f_varint(1, draw(INT64))  # a second IR version: the last one counts
    return data


@needs_onnx
@FUZZ
@given(random_models())
def test_agrees_with_onnx_on_random_models(data: bytes) -> None:
    assert read(data) == onnx_says(data)


@needs_onnx
@FUZZ
@given(st.data())
def test_agrees_with_onnx_on_damaged_models(data: st.DataObject) -> None:
    model = damage(bytearray(pb.detector(weights=64)), data)
    try:
        mine = read(model)
    except BinaryError:
        return
    try:
        theirs = onnx_says(model)
    except DecodeError:
        return  # damage inside a node or a weight, which this reader steps over unread
    assert mine == theirs


@needs_onnx
@FUZZ
@given(st.binary(max_size=256))
def test_agrees_with_onnx_whenever_both_read_random_bytes(data: bytes) -> None:
    try:
        mine = read(data)
    except BinaryError:
        return
    assert mine == onnx_says(data)  # what this reader accepts, protobuf accepts alike


# --- the real models in every ORT wheel -----------------------------------------------------


def cached_blob(sha256: str) -> Path:
    base = os.environ.get("ORTBUNDLE_CACHE_DIR")
    if base is None:
        base = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ortbundle")
    return Path(base) / "sha256" / sha256[:2] / sha256


@pytest.mark.real
def test_the_datasets_in_the_ort_wheel() -> None:
    wheel = cached_blob(WEBGPU_WHEEL_SHA256)
    if not wheel.is_file():
        pytest.skip(
            f"the onnxruntime-webgpu wheel is not cached at {wheel} (a real build fetches it)"
        )
    with zipfile.ZipFile(wheel) as archive:
        models = {
            name: read_model_bytes(archive.read(f"onnxruntime/datasets/{name}.onnx"), name=name)
            for name in ("logreg_iris", "mul_1", "sigmoid")
        }
    logreg, mul, sigmoid = models["logreg_iris"], models["mul_1"], models["sigmoid"]
    assert all(m.ir_version == 3 and m.metadata == () for m in models.values())

    assert (logreg.producer_name, logreg.domain) == ("OnnxMLTools", "onnxml")
    assert logreg.opsets == (Opset("ai.onnx.ml", 1),)
    assert logreg.opset() is None
    assert logreg.inputs == (TensorSpec("float_input", "FLOAT", (3, 2), "tensor", "tensor(float)"),)
    assert [(s.name, s.onnx_type, s.shape) for s in logreg.outputs] == [
        ("label", "tensor(int64)", (3,)),
        ("probabilities", "seq(map(int64,tensor(float)))", None),
    ]

    assert mul.opsets == (Opset("", 7),)
    # W is both a graph input and an initializer (IR 3): not an input, as in onnxruntime
    assert mul.inputs == (TensorSpec("X", "FLOAT", (3, 2), "tensor", "tensor(float)"),)
    assert mul.outputs == (TensorSpec("Y", "FLOAT", (3, 2), "tensor", "tensor(float)"),)

    assert sigmoid.opsets == (Opset("", 9),)
    assert sigmoid.inputs == (TensorSpec("x", "FLOAT", (3, 4, 5), "tensor", "tensor(float)"),)
    assert sigmoid.outputs == (TensorSpec("y", "FLOAT", (3, 4, 5), "tensor", "tensor(float)"),)

    gate = gate_from_table(
        {"min_opset": 13, "inputs": [{"name": "x", "type": "float", "shape": [3, 4, 5]}]},
        where="sigmoid gate",
    )
    with pytest.raises(BinaryError, match="opset: expected ≥ 13, the file says 9"):
        gate.check(sigmoid, component="sigmoid", form="canonical", file="sigmoid.onnx")
    if HAVE_ONNX:
        with zipfile.ZipFile(wheel) as archive:
            for name, info in models.items():
                assert info == onnx_says(archive.read(f"onnxruntime/datasets/{name}.onnx"))


# --- gates -------------------------------------------------------------------------------------

YOLO_GATE = """
min_ir_version = 7
min_opset = 13
inputs = [{ name = "images", type = "FLOAT", shape = [1, 3, "height", "width"] }]
outputs = [{ name = "output0", type = "float", shape = [1, "*", 6] }]
metadata = { task = "detect", end2end = "True", names = true }
"""


def yolo_gate() -> ModelGate:
    return gate_from_table(tomllib.loads(YOLO_GATE), where="recipes/yolo11n.toml [gate]")


def check(gate: ModelGate, info: ModelInfo) -> BinaryError:
    with pytest.raises(BinaryError) as caught:
        gate.check(info, component="yolo11n", form="canonical", file="models/yolo11n.onnx")
    return caught.value


def test_a_gate_from_toml() -> None:
    gate = yolo_gate()
    assert gate.min_ir_version == 7 and gate.min_opset == 13
    assert gate.inputs == (IOGate("images", "FLOAT", (1, 3, "height", "width")),)
    assert gate.outputs == (IOGate("output0", "FLOAT", (1, "*", 6)),)
    assert gate.metadata == (("task", "detect"), ("end2end", "True"), ("names", None))
    gate.check(read(pb.detector()), component="yolo11n", form="canonical", file="yolo11n.onnx")
    assert ModelGate().violations(read(pb.detector())) == []


def test_opset_11_is_refused_where_13_is_required() -> None:
    error = check(yolo_gate(), read(pb.detector(opset=11)))
    text = str(error)
    assert "opset: expected ≥ 13, the file says 11" in text
    assert "canonical model of yolo11n" in text
    assert error.component == "yolo11n" and error.file == "models/yolo11n.onnx"
    assert "models/yolo11n.onnx" in text and "component yolo11n" in text
    assert error.fix and "opset" in error.fix
    assert error.exit_code == 7
    assert "1 problem)" in text


def test_every_violation_is_reported_at_once() -> None:
    data = pb.model(
        pb.graph(
            [
                pb.tensor_value("images", "UINT8", [1, 3, 640, 640]),
                pb.tensor_value("extra", "FLOAT"),
            ],
            [pb.tensor_value("output0", "FLOAT", [1, 84, 8400, 1])],
        ),
        ir_version=6,
        opsets=(("", 11), ("ai.onnx.ml", 3)),
        metadata=(("task", "segment"),),
    )
    error = check(yolo_gate(), read(data))
    lines = [line.strip() for line in str(error).splitlines() if line.strip().startswith("- ")]
    assert lines == [
        "- IR version: expected ≥ 7, the file says 6",
        "- opset: expected ≥ 13, the file says 11",
        "- input 'images': expected type tensor(float), the file says tensor(uint8)",
        "- input 'images': expected shape [1, 3, height, width], the file says [1, 3, 640, 640]",
        "- input 'extra': not in the gate, the file has it (extra: tensor(float) [shape unknown])",
        "- output 'output0': expected shape [1, *, 6], the file says [1, 84, 8400, 1]",
        "- metadata 'task': expected 'detect', the file says 'segment'",
        "- metadata 'end2end': expected it present, the file has no such key",
        "- metadata 'names': expected it present, the file has no such key",
    ]
    assert "(9 problems)" in str(error)


@pytest.mark.parametrize(
    ("gate_shape", "file_shape", "passes"),
    [
        ([1, 3, "height", "width"], [1, 3, "height", "width"], True),
        (["*", "*", "*", "*"], [1, 3, "height", None], True),
        ([1, 3, "h", "w"], [1, 3, "height", "width"], False),  # another symbolic name
        ([1, 3, 640, 640], [1, 3, "height", "width"], False),  # symbolic is not fixed
        ([1, 3, "height", "width"], [1, 3, 640, 640], False),  # fixed is not symbolic
        ([1, 3, "*"], [1, 3, 640, 640], False),  # rank
        (["*"], None, False),  # no shape in the file
        ([], [], True),  # a scalar
        ([1, "*"], [1, None], True),  # an unknown dimension only matches "*"
        ([1, 5], [1, None], False),
    ],
)
def test_shapes(gate_shape: list[Any], file_shape: list[Any] | None, passes: bool) -> None:
    gate = gate_from_table({"inputs": [{"name": "x", "shape": gate_shape}]}, where="t")
    info = read(pb.model(pb.graph([pb.tensor_value("x", "FLOAT", file_shape)], [])))
    assert (gate.violations(info) == []) is passes


def test_an_input_the_file_lacks_names_what_it_has() -> None:
    gate = gate_from_table({"inputs": [{"name": "input"}]}, where="t")
    assert gate.violations(read(pb.detector())) == [
        "input 'input': expected it, the file has no such input (its inputs: 'images')",
        "input 'images': not in the gate, the file has it (images: tensor(float) "
        "[1, 3, height, width])",
    ]


def test_type_strings_gate_non_tensor_outputs() -> None:
    probabilities = pb.sequence_type(pb.map_type("INT64", pb.tensor_type("FLOAT")))
    info = read(pb.model(pb.graph([], [pb.value_info("p", probabilities)])))
    good = gate_from_table(
        {"outputs": [{"name": "p", "type": "seq(map(int64,tensor(float)))"}]}, where="t"
    )
    assert good.violations(info) == []
    bad = gate_from_table({"outputs": [{"name": "p", "type": "FLOAT"}]}, where="t")
    assert bad.violations(info) == [
        "output 'p': expected type tensor(float), the file says seq(map(int64,tensor(float)))"
    ]


def test_metadata_keys_as_a_list() -> None:
    gate = gate_from_table({"metadata": ["names", "task", "imgsz"]}, where="t")
    assert gate.violations(read(pb.detector())) == []
    missing = read(pb.detector(metadata=(("task", "detect"),)))
    assert len(gate.violations(missing)) == 2


def test_opset_imports_without_the_default_domain_or_with_it_twice() -> None:
    gate = ModelGate(min_opset=13)
    ml_only = read(pb.model(pb.graph([], []), opsets=(("ai.onnx.ml", 3),)))
    assert gate.violations(ml_only) == [
        "opset: expected the default domain at ≥ 13, the file imports no default-domain opset "
        "(imports: ai.onnx.ml:3)"
    ]
    twice = read(pb.model(pb.graph([], []), opsets=(("", 17), ("ai.onnx", 11))))
    assert twice.opset() == 11
    assert "imports the default domain 2 times" in gate.violations(twice)[0]
    assert gate.violations(read(pb.model(pb.graph([], []), opsets=(("ai.onnx", 13),)))) == []


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"min_opset": 13, "max_opset": 17}, "unknown gate key(s) max_opset"),
        ({"min_opset": True}, "min_opset must be a positive integer"),
        ({"min_opset": "13"}, "min_opset must be a positive integer"),
        ({"min_ir_version": 0}, "min_ir_version must be a positive integer"),
        ({"inputs": {"name": "x"}}, "inputs must be a list of tables"),
        ({"inputs": ["x"]}, "expected a table"),
        ({"inputs": [{"type": "FLOAT"}]}, "name must be a non-empty string"),
        ({"inputs": [{"name": "x", "dtype": "FLOAT"}]}, "unknown key(s) dtype"),
        ({"inputs": [{"name": "x", "type": "float32"}]}, "neither an ONNX element type"),
        ({"inputs": [{"name": "x", "type": 1}]}, "type must be a string"),
        ({"inputs": [{"name": "x", "shape": "1x3"}]}, "shape must be a list"),
        ({"inputs": [{"name": "x", "shape": [1, -1]}]}, "shape entry -1"),
        ({"inputs": [{"name": "x", "shape": [1.5]}]}, "shape entry 1.5"),
        ({"inputs": [{"name": "x", "shape": [True]}]}, "shape entry True"),
        ({"inputs": [{"name": "x", "shape": [""]}]}, "shape entry ''"),
        ({"outputs": [{"name": "y"}, {"name": "y"}]}, "names y more than once"),
        ({"metadata": "task"}, "metadata must be a list of keys or a table"),
        ({"metadata": [""]}, "metadata keys must be non-empty strings"),
        ({"metadata": {"stride": 32}}, "metadata 'stride' must be a string"),
        ({"metadata": {"task": False}}, "metadata 'task' must be a string"),
    ],
)
def test_a_bad_gate_table_is_a_config_error(table: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        gate_from_table(table, where="recipes/yolo11n.toml [gate]")
    assert says in str(caught.value)
    assert str(caught.value).startswith("recipes/yolo11n.toml [gate]")
    assert caught.value.fix
    assert caught.value.exit_code == 2


def test_a_gate_that_is_not_a_table() -> None:
    with pytest.raises(ConfigError, match="must be a table"):
        gate_from_table(["min_opset"], where="t")  # type: ignore[arg-type]
