"""Small versions of common vision and transformer architectures, in plain PyTorch.

The topologies follow the torchvision definitions (torchvision is not a test dependency), at
reduced widths and resolutions so that export, import and simulation stay fast. Weights are
random with a fixed seed; batch norms get random statistics so that folding them is not a
no-op. Every model is returned in eval mode.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

import quantemu


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    conv = nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False)
    return [conv, nn.BatchNorm2d(cout)]


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            *_conv_bn(cin, cout, 3, stride), nn.ReLU(), *_conv_bn(cout, cout, 3)
        )
        self.down = (
            nn.Sequential(*_conv_bn(cin, cout, 1, stride))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.down(x))


class ResNet18(nn.Module):
    """torchvision's ResNet-18 topology (2 basic blocks per stage, 4 stages) at width ``w``."""

    def __init__(self, w: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(3, w, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], w
        for i, stride in enumerate((1, 2, 2, 2)):
            cout = w * 2**i
            blocks += [_BasicBlock(cin, cout, stride), _BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class _SqueezeExcite(nn.Module):
    def __init__(self, c: int, squeeze: int, gate: nn.Module, act: nn.Module) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)
        self.act, self.gate = act, gate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


class _InvertedResidual(nn.Module):
    """MobileNetV2 / V3 / EfficientNet's MBConv: expand, depthwise, (SE), project."""

    def __init__(  # noqa: PLR0917 (the paper's table columns, in order)
        self, cin: int, cout: int, k: int, stride: int, expand: int, act: type, se: nn.Module | None
    ) -> None:
        super().__init__()
        mid = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [*_conv_bn(cin, mid, 1), act()]
        layers += [*_conv_bn(mid, mid, k, stride, groups=mid), act()]
        if se is not None:
            layers.append(se)
        layers += _conv_bn(mid, cout, 1)
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


def _head(cin: int, classes: int) -> nn.Sequential:
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(cin, classes))


def mobilenet_v2(classes: int = 10) -> nn.Module:
    """MobileNetV2 (ReLU6, inverted residuals with linear bottlenecks), width 0.25-ish."""
    # (expand, cout, repeats, stride) as in the paper's table 2, channels divided by 4.
    cfg = ((1, 4, 1, 1), (6, 8, 2, 2), (6, 8, 2, 2), (6, 16, 2, 2), (6, 24, 1, 1))
    layers: list[nn.Module] = [*_conv_bn(3, 8, 3, 2), nn.ReLU6()]
    cin = 8
    for expand, cout, repeats, stride in cfg:
        for i in range(repeats):
            layers.append(
                _InvertedResidual(cin, cout, 3, stride if i == 0 else 1, expand, nn.ReLU6, None)
            )
            cin = cout
    layers += [*_conv_bn(cin, 64, 1), nn.ReLU6(), _head(64, classes)]
    return nn.Sequential(*layers)


def mobilenet_v3_small(classes: int = 10) -> nn.Module:
    """MobileNetV3-small: hard-swish, squeeze-excite with hard-sigmoid gates."""

    def se(c: int) -> nn.Module:
        return _SqueezeExcite(c, max(c // 4, 4), nn.Hardsigmoid(), nn.ReLU())

    # (k, expand, cout, se, act, stride), channels of the paper's table 2 divided by 2.
    cfg = (
        (3, 1, 8, True, nn.ReLU, 2),
        (3, 4, 12, False, nn.ReLU, 2),
        (5, 4, 20, True, nn.Hardswish, 2),
        (5, 6, 20, True, nn.Hardswish, 1),
        (5, 3, 24, True, nn.Hardswish, 1),
    )
    layers: list[nn.Module] = [*_conv_bn(3, 8, 3, 2), nn.Hardswish()]
    cin = 8
    for k, expand, cout, use_se, act, stride in cfg:
        block_se = se(cin * expand) if use_se else None
        layers.append(_InvertedResidual(cin, cout, k, stride, expand, act, block_se))
        cin = cout
    layers += [*_conv_bn(cin, 48, 1), nn.Hardswish(), _head(48, classes)]
    return nn.Sequential(*layers)


def efficientnet_b0_like(classes: int = 10) -> nn.Module:
    """A few EfficientNet-B0 MBConv stages: SiLU, squeeze-excite with sigmoid gates."""

    def se(c: int, cin: int) -> nn.Module:
        return _SqueezeExcite(c, max(cin // 4, 2), nn.Sigmoid(), nn.SiLU())

    cfg = ((1, 3, 8, 1), (6, 3, 12, 2), (6, 5, 16, 2), (6, 3, 24, 2))  # expand, k, cout, stride
    layers: list[nn.Module] = [*_conv_bn(3, 8, 3, 2), nn.SiLU()]
    cin = 8
    for expand, k, cout, stride in cfg:
        layers.append(
            _InvertedResidual(cin, cout, k, stride, expand, nn.SiLU, se(cin * expand, cin))
        )
        cin = cout
    layers += [*_conv_bn(cin, 64, 1), nn.SiLU(), _head(64, classes)]
    return nn.Sequential(*layers)


class _Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, expand: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1, self.e3 = nn.Conv2d(squeeze, expand, 1), nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.e1(s)), torch.relu(self.e3(s))], 1)


def squeezenet(classes: int = 10) -> nn.Module:
    """SqueezeNet 1.1: fire modules (concatenated 1x1 and 3x3 expands), conv classifier."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, 2),
        nn.ReLU(),
        nn.MaxPool2d(3, 2, ceil_mode=True),
        _Fire(16, 4, 8),
        _Fire(16, 4, 8),
        nn.MaxPool2d(3, 2, ceil_mode=True),
        _Fire(16, 8, 16),
        _Fire(32, 8, 16),
        nn.Conv2d(32, classes, 1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(1),
    )


class _Attention(nn.Module):
    """timm's ViT attention: one qkv Linear, scaled dot products per head, output Linear.

    Written out rather than ``nn.MultiheadAttention``, whose eval-mode fast path
    (``aten::_native_multi_head_attention``) the TorchScript exporter cannot export.
    """

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1) * self.scale).softmax(-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class _EncoderBlock(nn.Module):
    """Pre-norm transformer encoder block: LayerNorm, multi-head attention, GELU (or ``act``)
    MLP."""

    def __init__(self, dim: int, heads: int, act: type[nn.Module] = nn.GELU) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = _Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), act(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyViT(nn.Module):
    """A ViT: patch embedding (strided conv), position embedding, one encoder block, head."""

    def __init__(self, dim: int = 32, heads: int = 4, patch: int = 4, classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, patch)
        self.pos = nn.Parameter(torch.randn(1, 64, dim) * 0.1)  # 32x32 input, 4x4 patches
        self.block = _EncoderBlock(dim, heads)
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.norm(self.block(tokens)).mean(1))


def encoder_block(dim: int = 32, heads: int = 4) -> nn.Module:
    """One encoder block alone, on (batch, tokens, dim) input."""
    return _EncoderBlock(dim, heads)


def encoder_block_relu(dim: int = 32, heads: int = 4) -> nn.Module:
    """The encoder block with a ReLU MLP, ``nn.TransformerEncoderLayer``'s default activation
    (and the form XMOS's toolchain can compile: it has no GELU kernel)."""
    return _EncoderBlock(dim, heads, nn.ReLU)


# name -> (builder, input shape with a batch of 1)
ZOO: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "resnet18": (ResNet18, (1, 3, 64, 64)),
    "mobilenet_v2": (mobilenet_v2, (1, 3, 64, 64)),
    "mobilenet_v3_small": (mobilenet_v3_small, (1, 3, 64, 64)),
    "efficientnet_b0": (efficientnet_b0_like, (1, 3, 64, 64)),
    "squeezenet": (squeezenet, (1, 3, 64, 64)),
    "vit": (TinyViT, (1, 3, 32, 32)),
    "encoder": (encoder_block, (1, 16, 32)),
    "encoder_relu": (encoder_block_relu, (1, 16, 32)),
}


def build(name: str, seed: int = 0) -> nn.Module:
    """The zoo model ``name`` with seeded random weights and batch-norm statistics, in eval mode."""
    torch.manual_seed(seed)
    model = ZOO[name][0]()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.2, 0.2)
    return model.eval()


def export(name: str, path, exporter: str) -> None:
    """Export ``name`` to ``path`` with ``exporter``: "torchscript" or "dynamo" (the default)."""
    model = build(name)
    x = torch.randn(ZOO[name][1])
    with torch.no_grad():
        if exporter == "torchscript":
            torch.onnx.export(model, (x,), str(path), dynamo=False)
        else:
            torch.onnx.export(model, (x,), str(path))


def compiled_export(name: str, exporter: str, folder, backend: str, *, seed: int = 7, **options):
    """``name`` exported by ``exporter`` into ``folder`` (warnings silenced) and compiled onto
    ``backend`` with 8 seeded normal calibration samples; returns ``(program, rng)``, the
    generator positioned after the calibration draw, for the caller's inputs."""
    path = Path(folder) / f"{name}_{exporter}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export(name, path, exporter)
    rng = np.random.default_rng(seed)
    calib = rng.standard_normal((8, *ZOO[name][1][1:])).astype(np.float32)
    return quantemu.compile(str(path), backend, calib=calib, **options), rng
