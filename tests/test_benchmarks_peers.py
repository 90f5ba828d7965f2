"""benchmarks/peers.py: the torch systems' onnx2torch module (constant-shape Reshape)."""

import importlib.util
import os

import numpy as np
import pytest

from tests.benchmark_modules import load_benchmark

pytest.importorskip("onnx")
pytest.importorskip("torch")
if importlib.util.find_spec("onnx2torch") is None:  # importing it may need torchvision's stub
    pytest.skip("onnx2torch is not installed", allow_module_level=True)

peers = load_benchmark("peers")


def test_systems_and_missing() -> None:
    assert "torch-compile" in peers.SYSTEMS
    assert set(peers.SYSTEMS) == set(peers.BUILDERS) == set(peers.IMPORTS) == set(peers.MODULES)
    assert peers.missing("torch-compile") is None


def test_static_reshape_matches_numpy(tmp_path: "os.PathLike[str]") -> None:
    """A model with a constant-shape Reshape (with a 0: copy that dimension) and a computed
    one: both torch systems' module gives numpy's answer, the constant one as Python ints."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    shape = numpy_helper.from_array(np.array([0, 4, -1], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"]),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Reshape", ["y", "s"], ["z"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 6]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3, 8])], [shape])
    path = os.path.join(tmp_path, "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    x = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
    info: dict[str, object] = {}
    y, z = peers.build_torch(path, {"x": x}, 1, info)()
    assert y.shape == (2, 4, 6)
    np.testing.assert_array_equal(y, x.reshape(2, 4, -1))
    np.testing.assert_array_equal(z, x)
    peers._usable_torchvision()
    import onnx2torch

    module = onnx2torch.convert(onnx.load(path))
    kinds = [type(m).__name__ for m in module.modules()]
    assert kinds.count("StaticReshape") == 1 and kinds.count("OnnxReshape") == 1
