"""`torch.compile(model, backend="ember")`: each graph TorchDynamo captures, compiled by ember.

    import ember.torch_compile  # registers the backend (an installed ember also declares it
                                # as a torch_dynamo_backends entry point)
    fast = torch.compile(net.eval(), backend="ember")
    y = fast(x)

Dynamo splits a function at graph breaks and runs the Python between graphs itself; each
captured FX graph is exported with torch.export, imported by `ember.frontend.torch` and
compiled by `ember.compile`. Parameters and buffers the graph reads become ember constants
(folded, prepacked); they are watched by their version counter and storage, and a graph
whose weights changed in place is compiled again. Inputs and outputs are CPU tensors shared
with numpy (no copies for contiguous inputs). Inference only: outputs carry no autograd
history. A graph with non-tensor inputs (symbolic sizes after a recompilation) runs in torch.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.errors import ArgumentError

try:
    import torch
except ImportError as _err:  # pragma: no cover - torch is an optional dependency
    raise ImportError("the torch.compile backend needs torch: pip install 'ember[torch]'"
                      ) from _err

__all__ = ["ember_backend", "EmberGraph"]


def _is_weight(node: Any, tensor: Any) -> bool:
    """A placeholder Dynamo lifted from a module's parameters or buffers."""
    if isinstance(tensor, torch.nn.Parameter):
        return True
    source = getattr(node.meta.get("grapharg"), "source", None)
    while source is not None:
        if "ParamBuffer" in type(source).__name__:
            return True
        source = getattr(source, "base", None)
    return False


class EmberGraph:
    """A captured graph compiled by ember, called by Dynamo with the graph's inputs."""

    def __init__(self, gm: Any, example_inputs: Sequence[Any], options: dict[str, Any]) -> None:
        self.gm = gm
        self.options = options
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.weights = [i for i, (n, t) in enumerate(zip(placeholders, example_inputs))
                        if _is_weight(n, t)]
        self.compiled: Any = None
        self.stamp: tuple[Any, ...] = ()
        self._compile(list(example_inputs))

    def _stamps(self, inputs: Sequence[Any]) -> tuple[Any, ...]:
        return tuple((inputs[i]._version, inputs[i].data_ptr()) for i in self.weights)

    def _compile(self, inputs: list[Any]) -> None:
        import ember
        from ember.frontend.torch import from_exported_program

        weights = set(self.weights)
        program = torch.export.export(self.gm, tuple(inputs), strict=False)
        fixed = {i: inputs[i].detach().cpu().numpy() for i in weights}
        graph = from_exported_program(program, [t for t in inputs],
                                      constant_inputs=fixed, name="dynamo_graph")
        self.compiled = ember.compile(graph, **self.options)
        self.stamp = self._stamps(inputs)
        self.user = [i for i in range(len(inputs)) if i not in weights]

    def __call__(self, *inputs: Any) -> tuple[Any, ...]:
        if self._stamps(inputs) != self.stamp:       # a weight was changed in place
            self._compile(list(inputs))
        arrays = []
        for i in self.user:
            tensor = inputs[i]
            if tensor.device.type != "cpu":
                raise ArgumentError(f"ember runs on CPU tensors; input {i} is on "
                                    f"{tensor.device}")
            arrays.append(tensor.detach().numpy())
        outputs = self.compiled.run(arrays)
        return tuple(torch.from_numpy(np.asarray(o)) for o in outputs)


def ember_backend(gm: Any, example_inputs: Sequence[Any], **options: Any) -> Callable[..., Any]:
    """The Dynamo backend: compile `gm` with ember (options go to ember.compile), or leave
    it to torch when its inputs are not all tensors."""
    if not all(isinstance(t, torch.Tensor) for t in example_inputs):
        return gm.forward
    return EmberGraph(gm, example_inputs, options)


def _register() -> None:
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    if "ember" not in _BACKENDS:
        register_backend(name="ember")(ember_backend)


_register()
