"""The zoo's architectures as torch.nn.Modules (torchvision / Hugging Face layouts), with
seeded random weights and non-trivial BatchNorm statistics, for the PyTorch frontend.

    net = resnet18(width=16).eval()
    graph = ember.frontend.torch.from_torch(net, (torch.randn(1, 3, 64, 64),))
"""

from __future__ import annotations

import math

try:
    import torch
    from torch import nn
except ImportError as _err:  # pragma: no cover - torch is an optional dependency
    raise ImportError("the torch zoo needs torch: pip install 'ember[torch]'") from _err

__all__ = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet", "bert", "lstm_lm",
           "randomize"]


def randomize(module: nn.Module, seed: int = 0) -> nn.Module:
    """Give every BatchNorm random statistics and affine weights (a freshly built one is the
    identity, which would hide a wrong fold); returns the module in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            with torch.no_grad():
                m.weight.copy_(torch.rand(c, generator=generator) * 0.8 + 0.6)
                m.bias.copy_(torch.randn(c, generator=generator) * 0.1)
                m.running_mean.copy_(torch.randn(c, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=generator) * 1.5 + 0.5)
    return module.eval()


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
             act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups,
                                         bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class _Block(nn.Module):
    """ResNet basic block (two 3x3) or bottleneck (1x1, 3x3 with the stride, 1x1)."""

    def __init__(self, cin: int, planes: int, stride: int, bottleneck: bool) -> None:
        super().__init__()
        cout = planes * (4 if bottleneck else 1)
        if bottleneck:
            self.body = nn.Sequential(_conv_bn(cin, planes, 1), _conv_bn(planes, planes, 3, stride),
                                      _conv_bn(planes, cout, 1, act=None))
        else:
            self.body = nn.Sequential(_conv_bn(cin, planes, 3, stride),
                                      _conv_bn(planes, cout, 3, act=None))
        self.downsample = (_conv_bn(cin, cout, 1, stride, act=None)
                           if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.downsample(x))


class ResNet(nn.Module):
    def __init__(self, layers: tuple[int, ...], bottleneck: bool, width: int,
                 num_classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, width, 7, 2), nn.MaxPool2d(3, 2, 1))
        blocks: list[nn.Module] = []
        cin = width
        for stage, count in enumerate(layers):
            planes = width * 2**stage
            for index in range(count):
                stride = 2 if stage > 0 and index == 0 else 1
                blocks.append(_Block(cin, planes, stride, bottleneck))
                cin = planes * (4 if bottleneck else 1)
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def resnet18(width: int = 64, num_classes: int = 1000, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return randomize(ResNet((2, 2, 2, 2), False, width, num_classes), seed)


def resnet50(width: int = 64, num_classes: int = 1000, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return randomize(ResNet((3, 4, 6, 3), True, width, num_classes), seed)


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = [_conv_bn(cin, hidden, 1, act=nn.ReLU6)] if expand != 1 else []
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                   _conv_bn(hidden, cout, 1, act=None)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.residual else self.conv(x)


def _divisible(value: float, divisor: int = 8) -> int:
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def mobilenet_v2(width_mult: float = 1.0, num_classes: int = 1000, seed: int = 0) -> nn.Module:
    """MobileNetV2 (torchvision layout): inverted residuals, depthwise convs, ReLU6."""
    torch.manual_seed(seed)
    settings = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))
    cin = _divisible(32 * width_mult)
    layers: list[nn.Module] = [_conv_bn(3, cin, 3, 2, act=nn.ReLU6)]
    for t, c, n, s in settings:
        cout = _divisible(c * width_mult)
        for i in range(n):
            layers.append(_InvertedResidual(cin, cout, s if i == 0 else 1, t))
            cin = cout
    last = _divisible(1280 * max(1.0, width_mult))
    layers.append(_conv_bn(cin, last, 1, act=nn.ReLU6))
    net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Dropout(0.2), nn.Linear(last, num_classes))
    return randomize(net, seed)


class _Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, expand: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1 = nn.Conv2d(squeeze, expand, 1)
        self.expand3 = nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.expand1(s)), torch.relu(self.expand3(s))], 1)


def squeezenet(num_classes: int = 1000, seed: int = 0) -> nn.Module:
    """SqueezeNet 1.1: fire modules, ceil-mode max pools, a conv classifier."""
    torch.manual_seed(seed)
    pool = nn.MaxPool2d(3, 2, ceil_mode=True)
    net = nn.Sequential(
        nn.Conv2d(3, 64, 3, 2), nn.ReLU(), pool, _Fire(64, 16, 64), _Fire(128, 16, 64), pool,
        _Fire(128, 32, 128), _Fire(256, 32, 128), pool, _Fire(256, 48, 192),
        _Fire(384, 48, 192), _Fire(384, 64, 256), _Fire(512, 64, 256), nn.Dropout(0.5),
        nn.Conv2d(512, num_classes, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return net.eval()


class _BertLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn = nn.Sequential(nn.Linear(hidden, intermediate), nn.GELU(),
                                 nn.Linear(intermediate, hidden))
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(h // self.heads) + bias
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, h)
        x = self.norm1(x + self.out(context))
        return self.norm2(x + self.ffn(x))


class Bert(nn.Module):
    """A BERT encoder: inputs (input_ids, attention_mask) int64 [batch, seq]."""

    def __init__(self, layers: int, hidden: int, heads: int, intermediate: int, vocab: int,
                 max_position: int) -> None:
        super().__init__()
        self.words = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(max_position, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(_BertLayer(hidden, heads, intermediate)
                                    for _ in range(layers))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.norm(self.words(input_ids) + self.positions(positions))
        bias = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x


def bert(layers: int = 12, hidden: int = 768, heads: int = 12, intermediate: int = 3072,
         vocab: int = 30522, max_position: int = 512, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return Bert(layers, hidden, heads, intermediate, vocab, max_position).eval()


class LstmLM(nn.Module):
    def __init__(self, layers: int, hidden: int, embed: int, vocab: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.lstm(self.embedding(input_ids))[0])


def lstm_lm(layers: int = 2, hidden: int = 256, embed: int = 256, vocab: int = 10000,
            seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return LstmLM(layers, hidden, embed, vocab).eval()
