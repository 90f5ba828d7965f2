"""Whole models shipped with onnx (onnx/backend/test/data): imported, compiled and compared.

The sets use opsets 6-10, older than ember imports, so each model is first converted to
opset 11 with onnx.version_converter (as the import error tells users to). "light" models
are full ImageNet networks whose weights are ConstantOfShape fills (folded at import),
compared with the output onnx ships; the same nine networks with those fills replaced by
random weights are compared with onnxruntime. The bigger ones run only with
EMBER_ONNX_ALL_MODELS=1.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper, version_converter

from ember import onnx_backend
from ember.ops.registry import all_ops

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
ALL = os.environ.get("EMBER_ONNX_ALL_MODELS", "") not in ("", "0")

LIGHT = ["squeezenet", "resnet50", "shufflenet"]
LIGHT_SLOW = ["densenet121", "inception_v2", "vgg19", "inception_v1", "bvlc_alexnet",
              "zfnet512"]

# model directory -> why ember is expected to fail it
_PRELU = ("the converted model keeps opset 6's PRelu slope of shape (C,), which does not "
          "broadcast under opset 7+ rules")
EXPECTED = {
    "test_PReLU_1d_multiparam": _PRELU,
    "test_PReLU_2d_multiparam": _PRELU,
    "test_PReLU_3d_multiparam": _PRELU,
}


def upgrade(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        upgraded = version_converter.convert_version(model, 11)
    except Exception as err:  # noqa: BLE001 - the converter's limits, not ember's
        pytest.skip(f"onnx.version_converter cannot convert this model to opset 11: {err}")
    # the converter keeps IR version 3, under which initializers must also be graph inputs
    upgraded.ir_version = max(upgraded.ir_version, 6)
    return upgraded


def missing_ops(model: onnx.ModelProto) -> list[str]:
    folded = {"Constant", "ConstantOfShape", "Identity", "Dropout", "Shape", "Size"}
    return sorted({n.op_type for n in model.graph.node} - set(all_ops()) - folded)


def dummy_input(vi: onnx.ValueInfoProto) -> np.ndarray:
    """The input onnx's backend runner feeds light models: arange / size, as float32."""
    shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    size = int(np.prod(shape))
    return (np.arange(size).reshape(shape) / size).astype(np.float32)


@pytest.mark.parametrize("name", LIGHT + [pytest.param(n, marks=pytest.mark.skipif(
    not ALL, reason="slow; set EMBER_ONNX_ALL_MODELS=1")) for n in LIGHT_SLOW])
def test_light_model(name):
    model = onnx.load(os.path.join(DATA, "light", f"light_{name}.onnx"))
    model = upgrade(model)
    missing = missing_ops(model)
    if missing:
        pytest.fail(f"ops not supported: {missing}")
    initializers = {t.name for t in model.graph.initializer}
    feeds = [dummy_input(vi) for vi in model.graph.input if vi.name not in initializers]
    (got, *_) = onnx_backend.prepare(model).run(feeds)
    want = numpy_helper.to_array(onnx.load_tensor(
        os.path.join(DATA, "light", f"light_{name}_output_0.pb")))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)


def with_random_weights(model: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """The model with each ConstantOfShape fill (its weights) replaced by a random
    initializer of the same shape: He-scaled normal for kernels, uniform in [0.5, 1.5] for
    1-d tensors (biases, batch-norm scales, means and variances, which must be positive)."""
    rng = np.random.default_rng(seed)
    shapes = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    out = onnx.ModelProto.FromString(model.SerializeToString())
    kept = []
    for node in out.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in shapes:
            kept.append(node)
            continue
        shape = [int(d) for d in shapes[node.input[0]]]
        if len(shape) == 1:
            data = rng.uniform(0.5, 1.5, shape)
        else:
            fan_in = int(np.prod(shape[1:]))
            data = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        out.graph.initializer.append(numpy_helper.from_array(data.astype(np.float32),
                                                             node.output[0]))
    del out.graph.node[:]
    out.graph.node.extend(kept)
    return out


@pytest.mark.parametrize("name", LIGHT + [pytest.param(n, marks=pytest.mark.skipif(
    not ALL, reason="slow; set EMBER_ONNX_ALL_MODELS=1")) for n in LIGHT_SLOW])
def test_light_model_random_weights_against_onnxruntime(name):
    ort = pytest.importorskip("onnxruntime")
    model = with_random_weights(upgrade(onnx.load(os.path.join(DATA, "light",
                                                                f"light_{name}.onnx"))), 0)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in initializers]
    rng = np.random.default_rng(1)
    feeds = [rng.standard_normal([d.dim_value for d in vi.type.tensor_type.shape.dim]
                                 ).astype(np.float32) for vi in inputs]
    (got, *_) = onnx_backend.prepare(model).run(feeds)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    (want, *_) = session.run(None, {vi.name: a for vi, a in zip(inputs, feeds)})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)


def _model_dirs() -> list[str]:
    dirs = []
    for kind in ("pytorch-converted", "pytorch-operator"):
        dirs += sorted(glob.glob(os.path.join(DATA, kind, "test_*")))
    return dirs


def _load_tensors(pattern: str) -> list[np.ndarray]:
    paths = sorted(glob.glob(pattern), key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    return [numpy_helper.to_array(onnx.load_tensor(p)) for p in paths]


@pytest.mark.parametrize("directory", _model_dirs(), ids=os.path.basename)
def test_pytorch_exported_model(directory):
    name = os.path.basename(directory)
    if name in EXPECTED:
        pytest.xfail(EXPECTED[name])
    model = upgrade(onnx.load(os.path.join(directory, "model.onnx")))
    missing = missing_ops(model)
    if missing:
        pytest.fail(f"ops not supported: {missing}")
    rep = onnx_backend.prepare(model)
    for data in sorted(glob.glob(os.path.join(directory, "test_data_set_*"))):
        inputs = _load_tensors(os.path.join(data, "input_*.pb"))
        expected = _load_tensors(os.path.join(data, "output_*.pb"))
        outputs = rep.run(inputs)
        assert len(outputs) == len(expected)
        for got, want in zip(outputs, expected):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-6)
