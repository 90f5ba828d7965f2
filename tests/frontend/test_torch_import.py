"""PyTorch import through torch.export: outputs checked against PyTorch itself."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")   # only torch's absence skips; ember's modules must import

import ember  # noqa: E402
from ember.errors import ArgumentError, ModelError, ShapeError, UnsupportedOpError  # noqa: E402
from ember.frontend.torch import from_torch  # noqa: E402
from ember.zoo import torch_nets  # noqa: E402

nn = torch.nn


def check(module, inputs, rtol=1e-4, atol=1e-4):
    """Import `module`, compile it with ember and compare every output with PyTorch's."""
    module = module.eval()
    graph = from_torch(module, inputs)
    compiled = ember.compile(graph)
    with torch.no_grad():
        expected = module(*inputs)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    got = compiled.run([t.numpy() for t in inputs])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e.numpy(), rtol=rtol, atol=atol)
    return graph


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# common blocks ------------------------------------------------------------------------------
class ConvPoolBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.gn = nn.GroupNorm(2, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = nn.functional.max_pool2d(self.depthwise(y), 3, 1, 1)
        y = nn.functional.avg_pool2d(y, 2, ceil_mode=False, count_include_pad=False)
        z = self.gn(self.up(nn.functional.hardswish(y)))
        pooled = nn.functional.adaptive_avg_pool2d(z, (2, 2))
        big = nn.functional.interpolate(z, scale_factor=2, mode="nearest")
        smooth = nn.functional.interpolate(z, size=(6, 6), mode="bilinear", align_corners=False)
        return pooled, big, smooth, nn.functional.pad(z, (1, 2, 0, 1), value=0.5)


def test_conv_pool_batch_norm():
    torch_nets.randomize(module := ConvPoolBN())
    check(module, (randn(2, 3, 16, 16),))


class Attention(nn.Module):
    """nn.MultiheadAttention with a causal float mask and a key padding mask, and
    scaled_dot_product_attention with a boolean mask."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)
        self.norm = nn.LayerNorm(16)

    def forward(self, x, padding):
        seq = x.shape[1]
        causal = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)
        y, weights = self.mha(x, x, x, attn_mask=causal, key_padding_mask=padding)
        q = self.norm(y).view(2, seq, 4, 4).transpose(1, 2)
        keep = torch.ones(seq, seq, dtype=torch.bool).tril()
        keep[2] = False                   # a row hidden entirely gives zeros, as in torch
        z = nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=keep)
        return nn.functional.gelu(z, approximate="tanh"), weights


def test_attention_with_masks():
    padding = torch.zeros(2, 6, dtype=torch.bool)
    padding[1, 4:] = True
    check(Attention(), (randn(2, 6, 16), padding))


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 12, num_layers=2, batch_first=True)
        self.gru = nn.GRU(8, 6, bidirectional=True)

    def forward(self, ids):
        e = self.embed(ids)
        out, (h, c) = self.lstm(e)
        g, hg = self.gru(e.transpose(0, 1))
        return out, h, c, g, hg


def test_lstm_gru_embedding():
    ids = torch.randint(0, 20, (2, 5), generator=torch.Generator().manual_seed(1))
    check(Recurrent(), (ids,))


class Elementwise(nn.Module):
    """Type promotion, comparisons, where/clamp, integer math, reductions and indexing."""

    def forward(self, x, n):
        a = torch.where(x > 0.5, x * 2, -x).clamp(-1.0, 1.5) + n / 4
        b = torch.div(x, 0.3, rounding_mode="floor") + torch.div(x, 0.3, rounding_mode="trunc")
        c = (x.pow(2) + x.abs().sqrt() + torch.rsqrt(x.abs() + 1)).logsumexp(-1)
        d = nn.functional.silu(x) + nn.functional.softplus(x, beta=2.0) + torch.sigmoid(x)
        e = (n % 3) * 2 - (n != 1).to(torch.int64) + n.cumsum(-1)
        f = x.var(dim=1, keepdim=True) + x.amax(0) - x.mean((0, 1)) + x.max(-1).values[:, None]
        g = x[:, 1:5:2].flip(-1) + x.index_select(1, torch.tensor([0, 2]))
        h = torch.cat([x, x.log_softmax(-1)], 0).repeat(1, 2)
        top = x.topk(2, dim=-1)
        return a, b, c, d, e, f, g, h, top.values, top.indices, x.argmax(-1), (x > 0).any(-1)


def test_elementwise_and_reductions():
    x = randn(3, 6)
    n = torch.arange(18).reshape(3, 6)
    check(Elementwise(), (x, n))


class Leaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.prelu = nn.PReLU(4)

    def forward(self, x):
        return (nn.functional.leaky_relu(x, 0.2) + nn.functional.elu(x) + self.prelu(x)
                + nn.functional.hardsigmoid(x) + nn.functional.relu6(x) + torch.tanh(x))


def test_activations():
    check(Leaky(), (randn(2, 4, 3, 3),))


# the zoo's architectures --------------------------------------------------------------------
@pytest.mark.parametrize("name, build, shape", [
    ("resnet18", lambda: torch_nets.resnet18(width=8, num_classes=10), (1, 3, 32, 32)),
    ("resnet50", lambda: torch_nets.resnet50(width=4, num_classes=10), (1, 3, 32, 32)),
    ("mobilenet_v2", lambda: torch_nets.mobilenet_v2(0.25, num_classes=10), (1, 3, 32, 32)),
    ("squeezenet", lambda: torch_nets.squeezenet(num_classes=10), (1, 3, 48, 48)),
])
def test_zoo_cnns(name, build, shape):
    check(build(), (randn(*shape),), rtol=1e-3, atol=1e-3)


def test_zoo_bert_and_lstm():
    net = torch_nets.bert(layers=2, hidden=32, heads=4, intermediate=64, vocab=50,
                          max_position=16)
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 50, (2, 8), generator=gen)
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[0, 6:] = 0
    check(net, (ids, mask), rtol=1e-3, atol=1e-3)
    check(torch_nets.lstm_lm(layers=1, hidden=16, embed=8, vocab=30), (ids % 30,))


# compile, dynamic shapes, errors -------------------------------------------------------------
def test_compile_takes_a_torch_module():
    net = torch_nets.resnet18(width=4, num_classes=5)
    x = randn(1, 3, 32, 32)
    model = ember.compile(net, example_inputs=(x,))
    with torch.no_grad():
        np.testing.assert_allclose(model.run([x.numpy()])[0], net(x).numpy(), rtol=1e-3,
                                   atol=1e-3)
    with pytest.raises(ArgumentError, match="needs example_inputs"):
        ember.compile(net)
    with pytest.raises(ArgumentError, match="example_inputs only applies"):
        ember.compile(model.graph, example_inputs=(x,))


def test_dynamic_shapes_are_specialized_to_the_examples():
    class Flat(nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], -1).softmax(-1) * x.shape[0]

    batch = torch.export.Dim("batch", min=2, max=64)
    x = randn(3, 4, 5)
    graph = from_torch(Flat(), (x,), dynamic_shapes={"x": {0: batch}})
    assert graph.inputs[0].type.shape == (3, 4, 5)
    got = ember.compile(graph).run([x.numpy()])[0]
    np.testing.assert_allclose(got, Flat()(x).numpy(), rtol=1e-5)


class Unsupported(nn.Module):
    def forward(self, x):
        y = torch.special.bessel_j0(x)
        return torch.bucketize(y, torch.tensor([0.0, 0.5])) + 1


def test_unsupported_ops_are_reported_at_once_with_their_source_lines():
    with pytest.raises(UnsupportedOpError, match="2 unsupported operators") as info:
        from_torch(Unsupported(), (randn(4),))
    text = str(info.value)
    for op in ("aten.special_bessel_j0.default", "aten.bucketize.Tensor"):
        assert op in text
    assert "test_torch_import.py" in text and "torch.special.bessel_j0(x)" in text
    assert len(info.value.problems) == 2


def test_bad_arguments_and_models():
    with pytest.raises(ArgumentError, match="expected a torch.nn.Module, got int"):
        from_torch(3, (randn(2),))
    with pytest.raises(ArgumentError, match="example input 0 is a list"):
        from_torch(nn.ReLU(), ([1.0, 2.0],))

    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(ModelError, match="torch.export could not capture Branchy"):
        from_torch(Branchy(), (randn(3),))
    with pytest.raises(UnsupportedOpError, match="data type torch.bfloat16 is not supported"):
        from_torch(nn.Linear(2, 2).to(torch.bfloat16), (randn(1, 2).to(torch.bfloat16),))


def test_training_only_outputs_are_rejected():
    class Indices(nn.Module):
        def forward(self, x):
            return nn.functional.max_pool2d(x, 2, return_indices=True)[1]

    with pytest.raises(UnsupportedOpError, match="output 1 of aten.max_pool2d_with_indices"):
        from_torch(Indices(), (randn(1, 1, 4, 4),))


class _Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


_F = nn.functional


@pytest.mark.parametrize("fn, inputs, message", [
    (lambda n: torch.div(n, 3, rounding_mode="floor"), [torch.arange(4)],
     "rounding_mode='floor' on integers"),
    (lambda x: _F.elu(x) * 0 + torch.ops.aten.elu(x, 1.0, 2.0), [randn(3)],
     "elu with scale or input_scale"),
    (lambda x: x[x > 0], [randn(4)], "boolean mask"),
    (lambda x: _F.pad(x, (-1, 0)), [randn(2, 4)], "negative padding"),
    (lambda x: _F.avg_pool2d(x, 2, divisor_override=3), [randn(1, 1, 4, 4)],
     "divisor_override"),
    (lambda x: torch.ops.aten._adaptive_avg_pool2d(x, [3, 3]), [randn(1, 1, 5, 5)],
     r"adaptive pooling from \(5, 5\) to \(3, 3\)"),
    (lambda n: n & 3, [torch.arange(4)], "bitwise operators on integers"),
    (lambda q, k: _F.scaled_dot_product_attention(q, k, k, enable_gqa=True),
     [randn(1, 4, 3, 2), randn(1, 2, 3, 2)], "grouped-query attention"),
])
def test_unsupported_arguments_name_the_operator(fn, inputs, message):
    with pytest.raises(UnsupportedOpError, match=message):
        from_torch(_Lambda(fn), tuple(inputs))


def test_mutated_buffers_and_non_tensor_outputs_are_rejected():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(1))

        def forward(self, x):
            self.count.add_(1)
            return x + self.count

    with pytest.raises(UnsupportedOpError, match="BUFFER_MUTATION.*mutates a buffer"):
        from_torch(Counter(), (randn(2),))
    with pytest.raises(UnsupportedOpError, match="output .* is a int; only tensor outputs"):
        from_torch(_Lambda(lambda x: (x * 2, x.shape[0])), (randn(3),))


def test_exported_program_inputs_must_match():
    from ember.frontend.torch import from_exported_program

    batch = torch.export.Dim("batch", min=2, max=8)
    program = torch.export.export(nn.ReLU(), (randn(3, 2),), dynamic_shapes=({0: batch},))
    with pytest.raises(ArgumentError, match="has 1 tensor inputs but 2 example inputs"):
        from_exported_program(program, [randn(3, 2), randn(3, 2)])
    with pytest.raises(ShapeError, match="symbolic dims.*pass example inputs"):
        from_exported_program(program)
