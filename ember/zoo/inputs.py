"""random_inputs: sensible seeded values for every input of a model (images, ids, masks)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper


def _vocab_size(model: onnx.ModelProto, name: str) -> int:
    """Rows of the table a Gather indexes with input `name`, else metadata, else 2."""
    tables = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Gather" and node.input[1] == name and node.input[0] in tables:
            return int(tables[node.input[0]].dims[0])
    props = {p.key: p.value for p in model.metadata_props}
    return int(props.get("vocab_size", 2))


def random_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """One array per graph input: float ~ N(0, 1); int ids within the vocabulary; an
    attention mask of ones ending in a few zeros; token types 0 then 1.

        feeds = random_inputs(build_model("bert-tiny"))
    """
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for value in model.graph.input:
        if value.name in initializers:  # old IR versions list weights as inputs
            continue
        tensor = value.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in tensor.shape.dim)
        if np.issubdtype(dtype, np.floating):
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
        elif "mask" in value.name:
            mask = np.ones(shape, dtype)
            if shape and shape[-1] > 1:
                mask[..., -max(1, shape[-1] // 8):] = 0
            feeds[value.name] = mask
        elif "token_type" in value.name:
            types = np.zeros(shape, dtype)
            if shape:
                types[..., shape[-1] // 2:] = 1
            feeds[value.name] = types
        else:
            feeds[value.name] = rng.integers(0, _vocab_size(model, value.name), shape
                                             ).astype(dtype)
    return feeds
