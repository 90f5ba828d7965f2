"""Image classifiers in the torchvision layout: ResNet-18/50, MobileNetV2, SqueezeNet 1.1."""

from __future__ import annotations

import math

import numpy as np
import onnx

from ember.zoo.builder import GraphBuilder, ZooError, check_config

# The last BatchNorm of a residual branch gets a small scale, the way trained networks
# end up (and torchvision's zero_init_residual), so activations do not grow block by block.
_BRANCH_END_GAMMA = (0.2, 0.5)


def _conv(b: GraphBuilder, x: str, cin: int, cout: int, kernel: int, stride: int, name: str,
          group: int = 1, bias: bool = False) -> str:
    """Conv with 'same'-style padding kernel // 2 and He-normal weights."""
    fan_in = cin // group * kernel * kernel
    w = b.normal((cout, cin // group, kernel, kernel), std=math.sqrt(2.0 / fan_in))
    inputs = [x, b.weight(f"{name}.weight", w)]
    if bias:
        inputs.append(b.weight(f"{name}.bias", b.normal((cout,), std=0.05)))
    pad = kernel // 2
    attrs: dict[str, object] = {"kernel_shape": [kernel, kernel], "strides": [stride, stride],
                                "pads": [pad] * 4}
    if group != 1:
        attrs["group"] = group
    return b.node("Conv", inputs, name=name, **attrs)


def _batch_norm(b: GraphBuilder, x: str, channels: int, name: str,
                gamma: tuple[float, float] = (0.6, 1.4)) -> str:
    """Inference BatchNorm with non-trivial statistics, so a wrong fold changes the output."""
    params = [b.uniform((channels,), *gamma), b.normal((channels,), std=0.1),
              b.normal((channels,), std=0.1), b.uniform((channels,), 0.5, 2.0)]
    names = [b.weight(f"{name}.{part}", p)
             for part, p in zip(("weight", "bias", "running_mean", "running_var"), params)]
    return b.node("BatchNormalization", [x, *names], name=name, epsilon=1e-5)


def _conv_bn(b: GraphBuilder, x: str, cin: int, cout: int, kernel: int, stride: int,
             conv: str, bn: str, act: str | None = "relu", group: int = 1,
             gamma: tuple[float, float] = (0.6, 1.4)) -> str:
    """Conv (no bias) -> BatchNorm -> ReLU / ReLU6 (as Clip) / nothing."""
    y = _batch_norm(b, _conv(b, x, cin, cout, kernel, stride, conv, group), cout, bn, gamma)
    if act == "relu":
        return b.node("Relu", [y], name=f"{bn}.relu")
    if act == "relu6":
        return b.clip(y, 0.0, 6.0, name=f"{bn}.relu6")
    return y


def _classifier(b: GraphBuilder, x: str, channels: int, classes: int) -> str:
    """fc: Gemm with a [classes, channels] weight (transB) to the output 'output'."""
    bound = 1.0 / math.sqrt(channels)
    w = b.weight("fc.weight", b.uniform((classes, channels), -bound, bound))
    bias = b.weight("fc.bias", b.uniform((classes,), -bound, bound))
    return b.node("Gemm", [x, w, bias], name="fc", output="output", transB=1)


def _check_image(model: str, batch: int, image_size: int, classes: int, smallest: int) -> None:
    check_config(model, batch=batch, image_size=image_size, num_classes=classes)
    if image_size < smallest:
        raise ZooError(f"model '{model}': image_size must be at least {smallest}, "
                       f"got {image_size}")


def _resnet(model: str, bottleneck: bool, layers: tuple[int, ...], batch: int,
            image_size: int, num_classes: int, opset: int, seed: int) -> onnx.ModelProto:
    _check_image(model, batch, image_size, num_classes, 32)
    b = GraphBuilder(model, opset, seed)
    x = b.input("input", np.float32, [batch, 3, image_size, image_size])
    x = _conv_bn(b, x, 3, 64, 7, 2, "conv1", "bn1")
    x = b.node("MaxPool", [x], name="maxpool", kernel_shape=[3, 3], strides=[2, 2],
               pads=[1, 1, 1, 1])
    expansion = 4 if bottleneck else 1
    cin = 64
    for stage, blocks in enumerate(layers):
        planes = 64 * 2**stage
        for index in range(blocks):
            stride = 2 if stage > 0 and index == 0 else 1
            p = f"layer{stage + 1}.{index}"
            if bottleneck:  # torchvision v1.5: the stride sits on the 3x3 conv
                y = _conv_bn(b, x, cin, planes, 1, 1, f"{p}.conv1", f"{p}.bn1")
                y = _conv_bn(b, y, planes, planes, 3, stride, f"{p}.conv2", f"{p}.bn2")
                y = _conv_bn(b, y, planes, planes * 4, 1, 1, f"{p}.conv3", f"{p}.bn3", None,
                             gamma=_BRANCH_END_GAMMA)
            else:
                y = _conv_bn(b, x, cin, planes, 3, stride, f"{p}.conv1", f"{p}.bn1")
                y = _conv_bn(b, y, planes, planes, 3, 1, f"{p}.conv2", f"{p}.bn2", None,
                             gamma=_BRANCH_END_GAMMA)
            shortcut = x
            if stride != 1 or cin != planes * expansion:
                shortcut = _conv_bn(b, x, cin, planes * expansion, 1, stride,
                                    f"{p}.downsample.0", f"{p}.downsample.1", None)
            x = b.node("Relu", [b.node("Add", [y, shortcut], name=f"{p}.add")],
                       name=f"{p}.relu")
            cin = planes * expansion
    x = b.node("GlobalAveragePool", [x], name="avgpool")
    x = b.node("Flatten", [x], name="flatten", axis=1)
    b.output(_classifier(b, x, cin, num_classes), np.float32, [batch, num_classes])
    return b.build(f"{model}: torchvision layout, random weights (seed {seed})")


def resnet18(*, batch: int = 1, image_size: int = 224, num_classes: int = 1000,
             opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """ResNet-18: basic blocks [2, 2, 2, 2]; input 'input' [batch, 3, size, size]."""
    return _resnet("resnet18", False, (2, 2, 2, 2), batch, image_size, num_classes, opset,
                   seed)


def resnet50(*, batch: int = 1, image_size: int = 224, num_classes: int = 1000,
             opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """ResNet-50: bottleneck blocks [3, 4, 6, 3]; input 'input' [batch, 3, size, size]."""
    return _resnet("resnet50", True, (3, 4, 6, 3), batch, image_size, num_classes, opset,
                   seed)


def _make_divisible(value: float, divisor: int = 8) -> int:
    """Round a channel count to a multiple of divisor, never more than 10% down."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


# MobileNetV2 inverted residual settings: expansion t, channels c, repeats n, stride s.
_MOBILENET_V2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2(*, batch: int = 1, image_size: int = 224, num_classes: int = 1000,
                 width_mult: float = 1.0, opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """MobileNetV2: inverted residuals with depthwise convs, ReLU6 written as Clip(0, 6)."""
    _check_image("mobilenet_v2", batch, image_size, num_classes, 32)
    if not isinstance(width_mult, (int, float)) or isinstance(width_mult, bool) \
            or not 0 < width_mult <= 4:
        raise ZooError(f"model 'mobilenet_v2': width_mult must be a number in (0, 4], "
                       f"got {width_mult!r}")
    b = GraphBuilder("mobilenet_v2", opset, seed)
    x = b.input("input", np.float32, [batch, 3, image_size, image_size])
    cin = _make_divisible(32 * width_mult)
    x = _conv_bn(b, x, 3, cin, 3, 2, "features.0.0", "features.0.1", "relu6")
    index = 1
    for t, c, n, s in _MOBILENET_V2_SETTINGS:
        cout = _make_divisible(c * width_mult)
        for i in range(n):
            stride = s if i == 0 else 1
            p = f"features.{index}.conv"
            hidden = int(round(cin * t))
            y, k = x, 0
            if t != 1:
                y = _conv_bn(b, y, cin, hidden, 1, 1, f"{p}.0.0", f"{p}.0.1", "relu6")
                k = 1
            y = _conv_bn(b, y, hidden, hidden, 3, stride, f"{p}.{k}.0", f"{p}.{k}.1", "relu6",
                         group=hidden)
            use_residual = stride == 1 and cin == cout
            gamma = _BRANCH_END_GAMMA if use_residual else (0.6, 1.4)
            y = _conv_bn(b, y, hidden, cout, 1, 1, f"{p}.{k + 1}", f"{p}.{k + 2}", None,
                         gamma=gamma)
            x = b.node("Add", [x, y], name=f"features.{index}.add") if use_residual else y
            cin = cout
            index += 1
    last = _make_divisible(1280 * max(1.0, width_mult))
    x = _conv_bn(b, x, cin, last, 1, 1, f"features.{index}.0", f"features.{index}.1", "relu6")
    x = b.node("GlobalAveragePool", [x], name="avgpool")
    x = b.node("Reshape", [x, b.const([batch, last], np.int64)], name="flatten")
    b.output(_classifier(b, x, last, num_classes), np.float32, [batch, num_classes])
    return b.build(f"mobilenet_v2 (width {width_mult}): torchvision layout, random weights "
                   f"(seed {seed})")


def _fire(b: GraphBuilder, x: str, cin: int, squeeze: int, expand: int, name: str) -> str:
    """Fire module: 1x1 squeeze, then 1x1 and 3x3 expands concatenated on channels."""
    s = b.node("Relu", [_conv(b, x, cin, squeeze, 1, 1, f"{name}.squeeze", bias=True)],
               name=f"{name}.squeeze_activation")
    e1 = b.node("Relu", [_conv(b, s, squeeze, expand, 1, 1, f"{name}.expand1x1", bias=True)],
                name=f"{name}.expand1x1_activation")
    e3 = b.node("Relu", [_conv(b, s, squeeze, expand, 3, 1, f"{name}.expand3x3", bias=True)],
                name=f"{name}.expand3x3_activation")
    return b.node("Concat", [e1, e3], name=f"{name}.concat", axis=1)


def squeezenet(*, batch: int = 1, image_size: int = 224, num_classes: int = 1000,
               opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """SqueezeNet 1.1: fire modules, ceil-mode max pools, conv classifier + AveragePool."""
    _check_image("squeezenet", batch, image_size, num_classes, 32)
    b = GraphBuilder("squeezenet", opset, seed)
    x = b.input("input", np.float32, [batch, 3, image_size, image_size])
    w = b.normal((64, 3, 3, 3), std=math.sqrt(2.0 / 27))
    x = b.node("Conv", [x, b.weight("features.0.weight", w),
                        b.weight("features.0.bias", b.normal((64,), std=0.05))],
               name="features.0", kernel_shape=[3, 3], strides=[2, 2])
    x = b.node("Relu", [x], name="features.1")
    size = (image_size - 3) // 2 + 1
    fires = {3: (64, 16, 64), 4: (128, 16, 64), 6: (128, 32, 128), 7: (256, 32, 128),
             9: (256, 48, 192), 10: (384, 48, 192), 11: (384, 64, 256), 12: (512, 64, 256)}
    for index in range(2, 13):
        if index in fires:
            x = _fire(b, x, *fires[index], name=f"features.{index}")
        else:
            x = b.node("MaxPool", [x], name=f"features.{index}", kernel_shape=[3, 3],
                       strides=[2, 2], ceil_mode=1)
            size = (size - 2) // 2 + 1  # ceil((size - 3) / 2) + 1
    x = _conv(b, x, 512, num_classes, 1, 1, "classifier.1", bias=True)
    x = b.node("Relu", [x], name="classifier.2")
    x = b.node("AveragePool", [x], name="classifier.3", kernel_shape=[size, size])
    x = b.node("Reshape", [x, b.const([batch, num_classes], np.int64)], name="flatten",
               output="output")
    b.output(x, np.float32, [batch, num_classes])
    return b.build(f"squeezenet 1.1: torchvision layout, random weights (seed {seed})")
