"""torch.compile(backend="ember"): captured graphs compiled by ember, checked against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")   # only torch's absence skips; ember's modules must import

import ember.torch_compile  # noqa: E402,F401 - registers the backend
from ember.errors import ArgumentError  # noqa: E402
from ember.zoo import torch_nets  # noqa: E402

nn = torch.nn


class Breaking(nn.Module):
    """Data-dependent control flow: Dynamo breaks the graph and runs the branch itself."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.bn(self.conv(x))
        if y.sum() > 0:
            y = y * 2
        return torch.relu(y) + 1


def test_graph_breaks_and_weight_updates():
    torch._dynamo.reset()
    net = torch_nets.randomize(Breaking())
    fast = torch.compile(net, backend="ember")
    x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for sample in (x, -x):                  # both branches
            np.testing.assert_allclose(fast(sample).numpy(), net(sample).numpy(), rtol=1e-5,
                                       atol=1e-5)
        net.conv.weight.mul_(2)                 # an in-place update: compiled again
        np.testing.assert_allclose(fast(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-5)


def test_zoo_model_through_torch_compile():
    torch._dynamo.reset()
    net = torch_nets.mobilenet_v2(0.25, num_classes=10)
    fast = torch.compile(net, backend="ember")
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        np.testing.assert_allclose(fast(x).numpy(), net(x).numpy(), rtol=1e-3, atol=1e-3)


def test_inputs_must_be_cpu_tensors():
    torch._dynamo.reset()
    net = nn.Linear(3, 2).eval()
    graph = ember.torch_compile.EmberGraph(torch.fx.symbolic_trace(net), [torch.randn(1, 3)],
                                           {})
    with pytest.raises(ArgumentError, match="input 0 is on meta"):
        graph(torch.empty(1, 3, device="meta"))
