"""Write the MXNet test fixtures: small Gluon model-zoo CNNs with random weights, exported
as symbol JSON + .params, with the outputs MXNet itself computes on a fixed input.

Run once, in an environment of its own (mxnet 1.9.1 needs numpy < 1.24):

    python -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1 'numpy<1.24'
    /tmp/mxvenv/bin/python tools/make_mxnet_fixtures.py tests/frontend/mxnet_fixtures

Each model is built from the model zoo's own classes and helpers at small widths (the
zoo's defaults would make megabytes of weights). BatchNorm statistics and affine weights
are random, so a wrong fold changes the output. ember's tests read the files without mxnet.
"""

from __future__ import annotations

import json
import os
import sys

import mxnet as mx
import numpy as np
from mxnet.gluon import nn
from mxnet.gluon.contrib.nn import HybridConcurrent
from mxnet.gluon.model_zoo import vision
from mxnet.gluon.model_zoo.vision import inception, squeezenet
from mxnet.gluon.model_zoo.vision import mobilenet as mobilenet_zoo

CLASSES = 10


def resnet18_v1():
    return vision.ResNetV1(vision.BasicBlockV1, [2, 2, 2, 2], [4, 4, 8, 12, 16],
                           classes=CLASSES)


def resnet10_v2():
    return vision.ResNetV2(vision.BasicBlockV2, [1, 1, 1, 1], [4, 4, 8, 12, 16],
                           classes=CLASSES)


def mobilenet():
    return vision.MobileNet(multiplier=0.0625, classes=CLASSES)


def mobilenet_v2_small():
    """MobileNetV2's layout (the zoo's _add_conv and LinearBottleneck, ReLU6 as clip) with
    fewer, narrower bottlenecks: the zoo fixes the last conv at 1280 channels."""
    net = nn.HybridSequential(prefix="mobilenetv2_")
    with net.name_scope():
        features = nn.HybridSequential(prefix="features_")
        with features.name_scope():
            mobilenet_zoo._add_conv(features, 8, kernel=3, stride=2, pad=1, relu6=True)
            for cin, cout, t, stride in ((8, 8, 1, 1), (8, 12, 6, 2), (12, 12, 6, 1),
                                         (12, 16, 6, 2)):
                features.add(mobilenet_zoo.LinearBottleneck(cin, cout, t, stride))
            mobilenet_zoo._add_conv(features, 32, relu6=True)
            features.add(nn.GlobalAvgPool2D())
        output = nn.HybridSequential(prefix="output_")
        with output.name_scope():
            output.add(nn.Conv2D(CLASSES, 1, use_bias=False, prefix="pred_"), nn.Flatten())
        net.add(features, output)
    return net


def squeezenet_small():
    """SqueezeNet 1.1's layout (the zoo's fire modules, ceil-mode pools) at 1/8 width."""
    net = nn.HybridSequential(prefix="squeezenet_")
    with net.name_scope():
        net.add(nn.Conv2D(8, kernel_size=3, strides=2), nn.Activation("relu"),
                nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True),
                squeezenet._make_fire(2, 8, 8), squeezenet._make_fire(2, 8, 8),
                nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True),
                squeezenet._make_fire(4, 16, 16), squeezenet._make_fire(4, 16, 16),
                nn.Dropout(0.5), nn.Conv2D(CLASSES, kernel_size=1), nn.Activation("relu"),
                nn.GlobalAvgPool2D(), nn.Flatten())
    return net


def vgg11_bn_small():
    """VGG-11-BN's feature extractor (the zoo's _make_features) and a narrow classifier."""
    net = nn.HybridSequential(prefix="vgg_")
    with net.name_scope():
        net.add(vision.VGG._make_features(None, [1, 1, 2], [4, 8, 8], True))
        net.add(nn.Dense(16, activation="relu"), nn.Dropout(0.5), nn.Dense(CLASSES))
    return net


def densenet_small():
    return vision.DenseNet(8, 4, [2, 2], bn_size=2, classes=CLASSES)


def inception_small():
    """Inception-v3's building blocks (the zoo's _make_basic_conv / _make_branch): an A
    block (avg-pool branch) and a B block (max-pool branch) at small widths."""
    net = nn.HybridSequential(prefix="inception_")
    with net.name_scope():
        net.add(inception._make_basic_conv(channels=8, kernel_size=3, strides=2))
        block_a = HybridConcurrent(axis=1, prefix="A_")
        with block_a.name_scope():
            block_a.add(inception._make_branch(None, (8, 1, None, None)))
            block_a.add(inception._make_branch(None, (6, 1, None, None), (8, 5, None, 2)))
            block_a.add(inception._make_branch(None, (8, 1, None, None), (12, 3, None, 1),
                                               (12, 3, None, 1)))
            block_a.add(inception._make_branch("avg", (4, 1, None, None)))
        block_b = HybridConcurrent(axis=1, prefix="B_")
        with block_b.name_scope():
            block_b.add(inception._make_branch(None, (16, 3, 2, None)))
            block_b.add(inception._make_branch(None, (8, 1, None, None), (12, 3, None, 1),
                                               (12, 3, 2, None)))
            block_b.add(inception._make_branch("max"))
        net.add(block_a, block_b, nn.GlobalAvgPool2D(), nn.Dropout(0.5), nn.Flatten(),
                nn.Dense(CLASSES))
    return net


MODELS = {"resnet18_v1": resnet18_v1, "resnet10_v2": resnet10_v2, "mobilenet": mobilenet,
          "mobilenet_v2": mobilenet_v2_small, "squeezenet": squeezenet_small,
          "vgg11_bn": vgg11_bn_small, "densenet": densenet_small,
          "inception": inception_small}
# DenseNet ends in a 7x7 average pool after a /8 reduction
IMAGE_SIZE = {"densenet": 56}


def randomize_batch_norm(net, rng):
    for name, param in net.collect_params().items():
        shape = param.shape
        if name.endswith("running_mean") or name.endswith("beta"):
            param.set_data(mx.nd.array(rng.normal(0, 0.1, shape)))
        elif name.endswith("running_var"):
            param.set_data(mx.nd.array(rng.uniform(0.5, 2.0, shape)))
        elif name.endswith("gamma"):
            param.set_data(mx.nd.array(rng.uniform(0.6, 1.4, shape)))


def main(out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    for index, (name, build) in enumerate(MODELS.items()):
        mx.random.seed(index)
        rng = np.random.default_rng(index)
        net = build()
        net.initialize(mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2.0))
        size = IMAGE_SIZE.get(name, 32)
        x = mx.nd.array(rng.standard_normal((1, 3, size, size)).astype(np.float32))
        net(x)                                   # shapes are inferred on the first call
        randomize_batch_norm(net, rng)
        net.hybridize()
        y = net(x)
        prefix = os.path.join(out_dir, name)
        net.export(prefix, epoch=0)
        with open(f"{prefix}-symbol.json") as f:       # the same JSON without indentation
            symbol = json.load(f)
        with open(f"{prefix}-symbol.json", "w") as f:
            json.dump(symbol, f, separators=(",", ":"))
        np.savez(f"{prefix}-io.npz", input=x.asnumpy(), output=y.asnumpy())
        size = sum(os.path.getsize(f"{prefix}{s}") for s in
                   ("-symbol.json", "-0000.params", "-io.npz"))
        print(f"{name}: output {y.shape}, {size / 1024:.1f} KiB")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/frontend/mxnet_fixtures")
