"""MXNet import: Gluon model-zoo CNNs exported by mxnet 1.9.1 (tools/make_mxnet_fixtures.py),
checked against the outputs mxnet recorded; the .params reader and the errors. No mxnet here."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError, ModelError, ShapeError, UnsupportedOpError
from ember.frontend.mxnet import from_mxnet, parse_attr
from ember.frontend.mxnet_params import load_params, save_params

FIXTURES = Path(__file__).parent / "mxnet_fixtures"
MODELS = sorted(p.name[:-len("-symbol.json")] for p in FIXTURES.glob("*-symbol.json"))


def test_fixtures_are_present():
    assert {"resnet18_v1", "resnet10_v2", "mobilenet", "mobilenet_v2", "squeezenet",
            "vgg11_bn", "densenet", "inception"} <= set(MODELS)


@pytest.mark.parametrize("name", MODELS)
def test_gluon_model_matches_mxnet(name):
    io = np.load(FIXTURES / f"{name}-io.npz")
    graph = from_mxnet(FIXTURES / f"{name}-symbol.json", FIXTURES / f"{name}-0000.params",
                       input_shapes={"data": io["input"].shape})
    (got,) = ember.compile(graph).run([io["input"]])
    expected = io["output"]
    scale = float(np.abs(expected).max())
    assert scale > 0
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * scale)


def test_params_file_from_mxnet():
    arrays = load_params(FIXTURES / "resnet18_v1-0000.params")
    symbol = json.loads((FIXTURES / "resnet18_v1-symbol.json").read_text())
    variables = {n["name"] for n in symbol["nodes"] if n["op"] == "null"}
    assert {k.split(":", 1)[1] for k in arrays} == variables - {"data"}
    assert all(k.startswith(("arg:", "aux:")) for k in arrays)
    means = [v for k, v in arrays.items() if k.endswith("running_var")]
    assert means and all(v.dtype == np.float32 and (v > 0).all() for v in means)


def test_params_round_trip_every_dtype():
    rng = np.random.default_rng(0)
    arrays = {"a": rng.standard_normal((2, 3)).astype(np.float32),
              "b": np.arange(5, dtype=np.int64), "c": rng.standard_normal(4).astype(np.float16),
              "d": np.array([[1, 0]], np.uint8), "e": rng.standard_normal((1, 1, 2))}
    loaded = load_params(save_params(arrays))
    assert list(loaded) == list(arrays)
    for key, value in arrays.items():
        assert loaded[key].dtype == value.dtype
        np.testing.assert_array_equal(loaded[key], value)


def test_params_errors():
    blob = save_params({"w": np.ones((2, 2), np.float32)})
    with pytest.raises(ModelError, match="ends inside array 0.*truncated"):
        load_params(blob[:40])
    with pytest.raises(ModelError, match="not an MXNet NDArray list"):
        load_params(b"\x00" * 24)
    sparse = bytearray(blob)
    struct.pack_into("<i", sparse, 28, 1)        # storage type of array 0: row_sparse
    with pytest.raises(UnsupportedOpError, match="sparse array"):
        load_params(bytes(sparse))
    bad_flag = bytearray(blob)
    struct.pack_into("<i", bad_flag, 28 + 8 + 16 + 8, 12)    # bfloat16's flag
    with pytest.raises(UnsupportedOpError, match="type flag 12"):
        load_params(bytes(bad_flag))
    with pytest.raises(ModelError, match="does not exist"):
        load_params("/nonexistent/model-0000.params")


def _symbol(*ops):
    """A symbol: data -> ops... in a chain, each op a (name, attrs) pair."""
    nodes = [{"op": "null", "name": "data", "inputs": []}]
    for name, attrs in ops:
        nodes.append({"op": name, "name": f"n{len(nodes)}", "attrs": attrs,
                      "inputs": [[len(nodes) - 1, 0, 0]]})
    return {"nodes": nodes, "arg_nodes": [0], "heads": [[len(nodes) - 1, 0, 0]]}


def test_small_symbols_against_numpy():
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    symbol = _symbol(("_mul_scalar", {"scalar": "2.0"}), ("_rminus_scalar", {"scalar": "1"}),
                     ("transpose", {"axes": "(0, 2, 1)"}), ("Reshape", {"shape": "(0, -1)"}),
                     ("softmax", {"axis": "-1", "temperature": "2.0"}))
    (got,) = ember.compile(from_mxnet(symbol, {}, {"data": x.shape})).run([x])
    y = (1 - 2 * x).transpose(0, 2, 1).reshape(2, -1) / 2
    expected = np.exp(y - y.max(-1, keepdims=True))
    np.testing.assert_allclose(got, expected / expected.sum(-1, keepdims=True), rtol=1e-5)


def test_unsupported_ops_are_reported_at_once():
    symbol = _symbol(("_contrib_ROIAlign", {}), ("Activation", {"act_type": "relu"}),
                     ("SliceChannel", {"num_outputs": "2"}))
    symbol["nodes"].append({"op": "Activation", "name": "act2", "attrs": {"act_type": "bogus"},
                            "inputs": [[0, 0, 0]]})
    symbol["heads"].append([4, 0, 0])
    with pytest.raises(UnsupportedOpError, match="3 unsupported") as info:
        from_mxnet(symbol, {}, {"data": (1, 2)})
    text = str(info.value)
    assert "node 'n1' (_contrib_ROIAlign)" in text and "node 'n3' (SliceChannel)" in text
    assert "node 'act2' (Activation): act_type 'bogus' is not supported" in text


def test_bad_symbols_and_inputs():
    with pytest.raises(ShapeError, match="input 'data' has no array.*input_shapes"):
        from_mxnet(_symbol(("relu", {})), {})
    with pytest.raises(ArgumentError, match=r"input_shapes names \['image'\]"):
        from_mxnet(_symbol(("relu", {})), {}, {"image": (1,)})
    with pytest.raises(ModelError, match="not valid JSON"):
        from_mxnet("{nodes: ", {})
    with pytest.raises(ModelError, match="no 'nodes' list"):
        from_mxnet({"heads": []}, {})
    with pytest.raises(ModelError, match="does not exist"):
        from_mxnet("/nonexistent/model-symbol.json")
    broken = _symbol(("relu", {}))
    broken["heads"] = [[7, 0, 0]]
    with pytest.raises(ModelError, match=r"heads: entry \[7, 0, 0\] names no earlier node"):
        from_mxnet(broken, {}, {"data": (1,)})
    with pytest.raises(UnsupportedOpError, match="layout 'NHWC' is not supported"):
        from_mxnet(_symbol(("Pooling", {"kernel": "(2, 2)", "layout": "NHWC"})), {},
                   {"data": (1, 2, 4, 4)})


def test_attribute_parsing():
    assert parse_attr("(3, 3)") == (3, 3)
    assert parse_attr("[1, 2]") == (1, 2)
    assert parse_attr("True") is True and parse_attr("false") is False
    assert parse_attr("0.001") == 0.001 and parse_attr("relu") == "relu"
    assert parse_attr("None") is None


@pytest.mark.parametrize("op, attrs, shape, message", [
    ("Deconvolution", {"kernel": "(2, 2)", "num_filter": "1", "target_shape": "(4, 4)"},
     (1, 1, 2, 2), "target_shape is not supported"),
    ("BatchNorm", {"axis": "3"}, (1, 2, 2, 2), "axis=3 is not supported"),
    ("LeakyReLU", {"act_type": "rrelu"}, (1, 2), "act_type 'rrelu' is not supported"),
    ("Pooling", {"kernel": "(2, 2)", "pool_type": "lp"}, (1, 1, 4, 4),
     "pool_type 'lp' is not supported"),
    ("Pooling", {"kernel": "(2, 2)", "pooling_convention": "same"}, (1, 1, 4, 4),
     "pooling_convention 'same'"),
    ("Reshape", {"shape": "(-3, 2)"}, (2, 2, 2), r"shape \(-3, 2\): the special values"),
    ("Reshape", {"shape": "(4, 2)", "reverse": "True"}, (2, 2, 2), "reverse=True"),
    ("mean", {"axis": "1", "exclude": "True"}, (2, 2), "exclude=True"),
    ("UpSampling", {"scale": "2", "sample_type": "bilinear"}, (1, 1, 2, 2),
     "only nearest upsampling"),
])
def test_unsupported_attributes_name_the_node(op, attrs, shape, message):
    nodes = [{"op": "null", "name": "data", "inputs": []}]
    inputs = [[0, 0, 0]]
    if op in ("Deconvolution", "BatchNorm"):
        count = 1 if op == "Deconvolution" else 4
        for i in range(count):
            nodes.append({"op": "null", "name": f"w{i}", "inputs": []})
            inputs.append([len(nodes) - 1, 0, 0])
    nodes.append({"op": op, "name": "bad", "attrs": attrs, "inputs": inputs})
    weights = {"w0": np.ones((1, 1, 2, 2) if op == "Deconvolution" else (2,), np.float32)}
    weights.update({f"w{i}": np.ones((2,), np.float32) for i in (1, 2, 3)})
    symbol = {"nodes": nodes, "arg_nodes": [0], "heads": [[len(nodes) - 1, 0, 0]]}
    with pytest.raises(UnsupportedOpError, match=f"node 'bad' \\({op}\\): {message}"):
        from_mxnet(symbol, weights, {"data": shape})


def test_input_type_flag_must_be_known():
    symbol = _symbol(("relu", {}))
    symbol["nodes"][0]["attrs"] = {"__dtype__": "12", "__shape__": "(1, 2)"}
    with pytest.raises(UnsupportedOpError, match="input 'data': type flag 12"):
        from_mxnet(symbol, {})
