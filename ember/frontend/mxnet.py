"""MXNet import: a symbol JSON file and its .params file become an ember Graph, without mxnet.

    graph = from_mxnet("resnet18_v1-symbol.json", "resnet18_v1-0000.params",
                       input_shapes={"data": (1, 3, 224, 224)})

The symbol file (what `HybridBlock.export` or `Symbol.save` writes) is JSON: `nodes`, each
with `op` ("null" for a variable), `name`, string-valued `attrs` and `inputs` as [node,
output, version] triples; `arg_nodes` lists the variables and `heads` the outputs. A
variable with an array in the params file (names prefixed "arg:" or "aux:") is a constant;
any other is a graph input. Operators are converted by CONVERTERS (MXNet's names and
defaults); every unsupported one is reported at once in one UnsupportedOperatorsError.
"""

from __future__ import annotations

import ast
import json
import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ember.errors import ArgumentError, ModelError, ShapeError, UnsupportedOpError
from ember.frontend.mxnet_params import TYPE_FLAGS, load_params
from ember.frontend.report import UnsupportedOperatorsError
from ember.graph.ir import Graph, GraphBuilder, Value, constant

__all__ = ["from_mxnet", "load_symbol", "CONVERTERS"]


def load_symbol(symbol: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """The symbol graph as a dict, from a path, JSON text or an already parsed dict."""
    if isinstance(symbol, Mapping):
        graph: Any = dict(symbol)
    else:
        text = os.fspath(symbol)
        if not text.lstrip().startswith("{"):
            if not os.path.isfile(text):
                raise ModelError(f"MXNet symbol file '{text}' does not exist")
            with open(text, encoding="utf-8") as f:
                text = f.read()
        try:
            graph = json.loads(text)
        except json.JSONDecodeError as err:
            raise ModelError(f"the MXNet symbol is not valid JSON: {err}") from None
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list) \
            or "heads" not in graph:
        raise ModelError("the MXNet symbol JSON has no 'nodes' list and 'heads'")
    return graph


def from_mxnet(symbol: str | os.PathLike[str] | Mapping[str, Any],
               params: str | os.PathLike[str] | bytes | Mapping[str, np.ndarray] | None = None,
               input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """Import an MXNet model: symbol (path, JSON text or dict) and params (path, bytes or a
    name -> array dict; "arg:"/"aux:" prefixes optional). input_shapes: the data inputs'
    shapes (needed where the symbol does not record them)."""
    graph = load_symbol(symbol)
    if params is None:
        arrays: dict[str, np.ndarray] = {}
    elif isinstance(params, Mapping):
        arrays = {k: np.asarray(v) for k, v in params.items()}
    else:
        arrays = load_params(params)
    weights = {k.split(":", 1)[1] if k[:4] in ("arg:", "aux:") else k: v
               for k, v in arrays.items()}
    return _Importer(graph, weights, dict(input_shapes or {})).run()


def parse_attr(text: Any) -> Any:
    """An MXNet attribute string as Python: "(3, 3)" -> (3, 3), "True" -> True, "0.5" ->
    0.5, "relu" -> "relu", "None" -> None."""
    if not isinstance(text, str):
        return text
    lowered = text.strip()
    if lowered in ("True", "true"):
        return True
    if lowered in ("False", "false"):
        return False
    try:
        value = ast.literal_eval(lowered)
    except (ValueError, SyntaxError):
        return lowered
    return tuple(value) if isinstance(value, list) else value


_UNKNOWN: Any = Value.__new__(Value)


class Node:
    """One MXNet operator node being converted: its attributes parsed, inputs resolved."""

    def __init__(self, index: int, raw: Mapping[str, Any], inputs: list[Value]) -> None:
        self.index = index
        self.op = str(raw.get("op"))
        self.name = str(raw.get("name", f"node{index}"))
        attrs = raw.get("attrs", raw.get("attr", raw.get("param", {}))) or {}
        self.attrs = {k: parse_attr(v) for k, v in attrs.items() if not k.startswith("__")}
        self.inputs = inputs

    def get(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def ints(self, key: str, default: Sequence[int] | None = None) -> tuple[int, ...]:
        value = self.attrs.get(key)
        if value is None or value == ():
            return tuple(default or ())
        return tuple(int(v) for v in (value if isinstance(value, tuple) else (value,)))


Converter = Callable[["_Importer", Node], "Value | Sequence[Value]"]


class _Importer:
    def __init__(self, graph: dict[str, Any], weights: dict[str, np.ndarray],
                 input_shapes: dict[str, Sequence[int]]) -> None:
        self.graph = graph
        self.weights = weights
        self.input_shapes = input_shapes
        self.builder = GraphBuilder("mxnet_model")
        self.outputs: dict[int, list[Value]] = {}
        self.problems: list[str] = []
        self.node: Node | None = None

    def run(self) -> Graph:
        nodes = self.graph["nodes"]
        variables = [n.get("name") for n in nodes if n.get("op") == "null"]
        unknown = sorted(set(self.input_shapes) - set(variables))
        if unknown:
            inputs = [v for v in variables if v not in self.weights]
            raise ArgumentError(f"input_shapes names {unknown}, which are not variables of the "
                                f"symbol (its inputs: {inputs})")
        for index, raw in enumerate(nodes):
            if raw.get("op") == "null":
                self.outputs[index] = [self._variable(raw)]
            else:
                self.outputs[index] = self._convert(index, raw)
        heads = [self._entry(h, "heads") for h in self.graph["heads"]]
        if self.problems:
            raise UnsupportedOperatorsError("MXNet", self.problems)
        return self.builder.finish(heads)

    def _entry(self, entry: Any, where: str) -> Value:
        try:
            node, output = int(entry[0]), int(entry[1])
            return self.outputs[node][output]
        except (TypeError, IndexError, KeyError, ValueError):
            raise ModelError(f"{where}: entry {entry!r} names no earlier node output") from None

    def _variable(self, raw: Mapping[str, Any]) -> Value:
        name = str(raw.get("name"))
        if name in self.weights:
            return self.constant(name, self.weights[name])
        attrs = raw.get("attrs", raw.get("attr", {})) or {}
        if name in self.input_shapes:
            shape = tuple(int(d) for d in self.input_shapes[name])
        else:
            declared = parse_attr(attrs.get("__shape__"))
            if not isinstance(declared, tuple) or not declared or 0 in declared:
                raise ShapeError(f"MXNet input '{name}' has no array in the params file and "
                                 f"no known shape; pass input_shapes={{'{name}': (...)}}")
            shape = tuple(int(d) for d in declared)
        flag = int(parse_attr(attrs.get("__dtype__", 0)) or 0)
        if flag not in TYPE_FLAGS:
            raise UnsupportedOpError(f"MXNet input '{name}': type flag {flag} is not supported")
        return self.builder.input(name, shape, TYPE_FLAGS[flag].name)

    def _convert(self, index: int, raw: Mapping[str, Any]) -> list[Value]:
        entries = raw.get("inputs", [])
        inputs = [self._entry(e, f"node '{raw.get('name')}' ({raw.get('op')})") for e in entries]
        node = Node(index, raw, inputs)
        self.node = node
        if any(v is _UNKNOWN for v in inputs):
            if node.op not in CONVERTERS:
                self._problem(node, f"operator '{node.op}' is not supported")
            return [_UNKNOWN] * 8
        converter = CONVERTERS.get(node.op)
        if converter is None:
            self._problem(node, f"operator '{node.op}' is not supported")
            return [_UNKNOWN] * 8
        try:
            result = converter(self, node)
        except UnsupportedOpError as err:
            self._problem(node, str(err))
            return [_UNKNOWN] * 8
        return [result] if isinstance(result, Value) else list(result)

    def _problem(self, node: Node, message: str) -> None:
        self.problems.append(f"node '{node.name}' ({node.op}): {message}")

    # building blocks -----------------------------------------------------------------
    def add(self, op: str, inputs: Sequence[Value | None], attrs: Mapping[str, Any] | None = None
            ) -> Value:
        label = self.node.name if self.node is not None else op.lower()
        return self.builder.add(op, list(inputs), dict(attrs or {}), name=label)[0]

    def constant(self, name: str, array: np.ndarray) -> Value:
        return constant(self.builder.unique(name), np.asarray(array))

    def scalar(self, value: float, like: Value) -> Value:
        return self.constant(f"{self.node.name if self.node else 'scalar'}:scalar",
                             np.array(value, like.type.dtype.numpy))


def _converters() -> dict[str, Converter]:
    from ember.frontend.mxnet_ops import CONVERTERS as table

    return table


CONVERTERS: dict[str, Converter] = _converters()
