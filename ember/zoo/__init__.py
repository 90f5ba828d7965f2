"""Model zoo: ONNX models of real architectures with seeded random weights, built on demand.

    from ember.zoo import build_model, random_inputs
    model = build_model("resnet18", image_size=64)
    feeds = random_inputs(model)
"""

from __future__ import annotations

import inspect
import os
import tempfile
from collections.abc import Callable
from functools import partial

import onnx

from ember.zoo.bert import bert
from ember.zoo.builder import GraphBuilder, ZooError
from ember.zoo.cnn import mobilenet_v2, resnet18, resnet50, squeezenet
from ember.zoo.inputs import random_inputs
from ember.zoo.lstm import lstm_lm

MODELS: dict[str, Callable[..., onnx.ModelProto]] = {
    "resnet18": resnet18,
    "resnet50": resnet50,
    "mobilenet_v2": mobilenet_v2,
    "squeezenet": squeezenet,
    "bert": bert,
    "bert-base": bert,
    "bert-tiny": partial(bert, layers=2, hidden=128, heads=2, intermediate=512, seq_len=32,
                         vocab=1000),
    "lstm_lm": lstm_lm,
}


def build_model(name: str, **config: object) -> onnx.ModelProto:
    """Build the model `name` (a key of MODELS) with config overriding its defaults.

        build_model("bert-tiny", layers=1, opset=13)
    """
    if name not in MODELS:
        raise ZooError(f"unknown model '{name}'; known models: {', '.join(MODELS)}")
    builder = MODELS[name]
    accepted = inspect.signature(builder).parameters
    unknown = sorted(set(config) - set(accepted))
    if unknown:
        raise ZooError(f"model '{name}': unknown config key(s) {', '.join(unknown)}; "
                       f"accepted: {', '.join(accepted)}")
    return builder(**config)


def save_model(name: str, path: str | os.PathLike[str], **config: object) -> str:
    """Build `name` and write it to `path` atomically (temp file, then rename); returns path."""
    model = build_model(name, **config)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=".zoo-", suffix=".onnx.tmp", dir=directory)
    os.close(fd)
    try:
        onnx.save_model(model, temp)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.remove(temp)
        raise
    return path


__all__ = ["MODELS", "GraphBuilder", "ZooError", "build_model", "random_inputs", "save_model"]
