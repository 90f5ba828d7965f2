"""MatMul, Gemm and Einsum against onnxruntime; fused epilogues; error paths."""

import numpy as np
import pytest

from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import GraphBuilder
from ember.lowering.kernel import build_group
from tests.ops.onnx_ref import check_op

RNG = np.random.default_rng(11)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


MATMUL_SHAPES = [
    ((5, 7), (7, 40)),                   # packed panels with a column tail
    ((20, 9), (9, 48)),                  # row tile tail, two panels
    ((2, 3, 9, 8), (8, 20)),             # batched A, shared B
    ((3, 1, 4, 8), (2, 8, 33)),          # broadcast batch dims on both sides
    ((1, 2, 16, 8), (1, 2, 8, 16)),      # attention scores
    ((8,), (8, 16)),                     # 1-D A
    ((4, 8), (8,)),                      # 1-D B
    ((8,), (8,)),                        # dot product
    ((3, 4), (4, 5)),                    # narrow N: no packing
]


@pytest.mark.parametrize("a, b", MATMUL_SHAPES)
def test_matmul_matches_onnxruntime(a, b):
    check_op("MatMul", [rand(*a), rand(*b)], {}, rtol=1e-4, atol=1e-5)


GEMM_CASES = [
    ((6, 9), (9, 40), (40,), {}),
    ((9, 20), (40, 9), (20, 1), {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}),
    ((3, 9), (9, 5), None, {"alpha": 2.0}),
    ((2, 20), (10, 20), (2, 10), {"transB": 1}),      # few rows, transposed B: dot products
    ((2, 40), (10, 40), (1,), {"transB": 1, "beta": 0.0}),
    ((17, 8), (8, 32), (1, 1), {"beta": 0.5}),
]


@pytest.mark.parametrize("a, b, c, attrs", GEMM_CASES)
def test_gemm_matches_onnxruntime(a, b, c, attrs):
    inputs = [rand(*a), rand(*b)] + ([] if c is None else [rand(*c)])
    check_op("Gemm", inputs, attrs, rtol=1e-4, atol=1e-5)


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 5, 8), (1, 2, 6, 8)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
]


@pytest.mark.parametrize("equation, shapes", EINSUM_CASES)
def test_einsum_matches_onnxruntime(equation, shapes):
    check_op("Einsum", [rand(*s) for s in shapes], {"equation": equation}, rtol=1e-4,
             atol=1e-5, opset=12)


def test_matmul_bias_gelu_like_epilogue_fused():
    """MatMul -> Add(bias) -> Relu as one kernel, with a row and a column tail."""
    x, w, bias = rand(1, 13, 24), rand(24, 40), rand(40)
    b = GraphBuilder("dense")
    xv, wv, bv = b.input("x", x.shape, "float32"), b.constant("w", w), b.constant("b", bias)
    (y,) = b.add("MatMul", [xv, wv])
    (y,) = b.add("Add", [y, bv])
    (y,) = b.add("Relu", [y])
    g = b.finish([y])
    module = build_group("dense", g.nodes, [xv, wv, bv], [y])
    out = np.zeros(y.type.shape, "float32")
    module(x, w, bias, out)
    np.testing.assert_allclose(out, np.maximum(x @ w + bias, 0), rtol=1e-4, atol=1e-5)


def test_gemm_epilogue_fused():
    a, w, c = rand(2, 32), rand(24, 32), rand(24)
    b = GraphBuilder("fc")
    av, wv, cv = b.input("a", a.shape, "float32"), b.constant("w", w), b.constant("c", c)
    (y,) = b.add("Gemm", [av, wv, cv], {"transB": 1})
    (y,) = b.add("Relu", [y])
    g = b.finish([y])
    module = build_group("fc", g.nodes, [av, wv, cv], [y])
    out = np.zeros(y.type.shape, "float32")
    module(a, w, c, out)
    np.testing.assert_allclose(out, np.maximum(a @ w.T + c, 0), rtol=1e-4, atol=1e-5)


def test_dense_shape_errors_name_the_node():
    b = GraphBuilder("bad")
    x = b.input("x", (2, 3, 8), "float32")
    with pytest.raises(ShapeError, match=r"node 'matmul' \(MatMul\): inner dimensions differ"):
        b.add("MatMul", [x, b.constant("w", rand(7, 4))])
    with pytest.raises(ShapeError, match="do not broadcast"):
        b.add("MatMul", [x, b.input("y", (4, 8, 2), "float32")])
    a = b.input("a", (4, 5), "float32")
    with pytest.raises(ShapeError, match=r"node 'gemm' \(Gemm\): inner dimensions differ"):
        b.add("Gemm", [a, b.constant("w3", rand(4, 6))])
    with pytest.raises(ShapeError, match="does not broadcast to the output"):
        b.add("Gemm", [a, b.constant("w4", rand(5, 6)), b.constant("c", rand(3))])
    with pytest.raises(ShapeError, match="must be 2-D"):
        b.add("Gemm", [x, b.constant("w5", rand(8, 2))])


def test_einsum_errors():
    b = GraphBuilder("bad")
    x = b.input("x", (3, 4), "float32")
    with pytest.raises(ShapeError, match="label 'j' has sizes 4 and 5"):
        b.add("Einsum", [x, b.input("y", (5, 2), "float32")], {"equation": "ij,jk->ik"})
    with pytest.raises(ShapeError, match="output label 'z'"):
        b.add("Einsum", [x], {"equation": "ij->z"})
    with pytest.raises(ShapeError, match="does not match an input of rank 2"):
        b.add("Einsum", [x], {"equation": "ijk->i"})
    with pytest.raises(UnsupportedOpError, match="required attribute 'equation'"):
        b.add("Einsum", [x])


def _weights_kernel(target):
    """The main kernel of a MatMul whose B is a constant (its panels packed at compile time)."""
    from ember.graph.ir import Node, Value, tensor_type
    from ember.lowering.kernel import lower_group_kernels

    a = Value("a", tensor_type((64, 96), "float32"))
    b = Value("b", tensor_type((96, 128), "float32"))
    y = Value("y", tensor_type((64, 128), "float32"))
    node = Node("MatMul", "mm", (a, b), (y,), {})
    return str(lower_group_kernels([node], [a, b], [y], "k", target,
                                   constant=[False, True]).main)


def test_constant_weights_prefetch_the_next_panel_on_cpus():
    for target in ("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v4",
                   "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"):
        text = _weights_kernel(target)
        assert "prefetch(" in text and "packed" in text, text
    assert "prefetch(" not in _weights_kernel("c")
