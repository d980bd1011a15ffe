"""The NNIE constraints lint over NodeView (pooling ceil_mode, depthwise conv, 2x nearest only)."""

from __future__ import annotations

import dataclasses

import pytest

from quantemu.backends.nnie.lint import Finding, NodeView, Severity, lint_nnie


def one(node: NodeView) -> Finding | None:
    findings = lint_nnie([node])
    assert len(findings) <= 1
    return findings[0] if findings else None


# -- pooling ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_with_ceil_mode_passes(op):
    assert (
        one(NodeView("p", op, {"kernel_shape": (3, 3), "strides": (2, 2), "ceil_mode": 1})) is None
    )


def test_pool_default_floor_is_an_error_without_shapes():
    f = one(NodeView("pool1", "MaxPool", {"kernel_shape": (2, 2), "strides": (2, 2)}))
    assert (f.node, f.rule, f.severity) == ("pool1", "pool_ceil_mode", Severity.ERROR)
    assert "ceil_mode=0" in f.message and "ceil_mode=1" in f.advice


def test_pool_floor_that_changes_the_size_is_an_error():
    # 3x3 stride 2 on 56x56: floor((56-3)/2)+1 = 27, ceil((56-3)/2)+1 = 28.
    node = NodeView(
        "pool1",
        "MaxPool",
        {"kernel_shape": (3, 3), "strides": (2, 2), "ceil_mode": 0},
        [(1, 64, 56, 56)],
    )
    f = one(node)
    assert f.severity is Severity.ERROR
    assert "floor gives [27, 27], NNIE's ceil gives [28, 28]" in f.message


def test_pool_floor_that_happens_to_agree_is_a_warning():
    # 2x2 stride 2 on 56x56: (56-2)/2 is exact, both give 28.
    node = NodeView(
        "pool2", "AveragePool", {"kernel_shape": (2, 2), "strides": (2, 2)}, [(1, 8, 56, 56)]
    )
    f = one(node)
    assert f.severity is Severity.WARNING and "both give spatial size [28, 28]" in f.message


def test_pool_pads_and_dilations_enter_the_size():
    # MaxPool k=3, dilation 2 (span 5), pads 1+1 on 10: (10+2-5)/2 = 3.5 -> floor 4, ceil 5.
    attrs = {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1), "dilations": (2, 2)}
    f = one(NodeView("p", "MaxPool", attrs, [(1, 1, 10, 10)]))
    assert "floor gives [4, 4], NNIE's ceil gives [5, 5]" in f.message


def test_global_pool_is_not_checked():
    assert one(NodeView("gap", "GlobalAveragePool")) is None


# -- depthwise convolution -------------------------------------------------------------------------


def test_depthwise_from_weight_shape():
    # weight (C_out, C_in/group, kH, kW) = (32, 1, 3, 3) with group 32: C_in = C_out = group = 32.
    f = one(NodeView("dw", "Conv", {"group": 32}, weight_shape=(32, 1, 3, 3)))
    assert (f.rule, f.severity) == ("depthwise_conv", Severity.WARNING)
    assert "group=32, C_in=32, C_out=32" in f.message


def test_depthwise_from_input_shape():
    f = one(NodeView("dw", "Conv", {"group": 16}, [(1, 16, 8, 8)]))
    assert f.rule == "depthwise_conv" and "C_in=16" in f.message


def test_depthwise_with_channel_multiplier():
    f = one(NodeView("dw2", "Conv", {"group": 8}, weight_shape=(16, 1, 3, 3)))
    assert f.rule == "depthwise_conv" and "C_out=16" in f.message


def test_dense_conv_passes():
    assert one(NodeView("c", "Conv", {"group": 1}, weight_shape=(32, 32, 3, 3))) is None
    assert one(NodeView("c", "Conv", {}, weight_shape=(32, 32, 3, 3))) is None


def test_single_channel_conv_is_not_depthwise():
    assert one(NodeView("c", "Conv", {"group": 1}, weight_shape=(1, 1, 3, 3))) is None


def test_grouped_conv_is_info():
    # group 4 on 32 -> 32 channels: weight (32, 8, 3, 3), C_in = 8*4 = 32 != group.
    f = one(NodeView("g", "Conv", {"group": 4}, weight_shape=(32, 8, 3, 3)))
    assert (f.rule, f.severity) == ("grouped_conv", Severity.INFO)


def test_grouped_conv_without_shapes_may_be_depthwise():
    f = one(NodeView("g", "Conv", {"group": 4}))
    assert f.rule == "depthwise_conv" and "possibly depthwise" in f.message


# -- upsampling ------------------------------------------------------------------------------------


def test_resize_2x_nearest_passes():
    node = NodeView("up", "Resize", {"mode": "nearest"}, constants={"scales": (1.0, 1.0, 2.0, 2.0)})
    assert one(node) is None
    legacy = NodeView("up", "Upsample", {"mode": b"nearest", "scales": (1.0, 1.0, 2.0, 2.0)})
    assert one(legacy) is None


def test_resize_2x_from_sizes():
    node = NodeView(
        "up", "Resize", {}, [(1, 8, 10, 12)], constants={"scales": (), "sizes": (1, 8, 20, 24)}
    )
    assert one(node) is None
    node = dataclasses.replace(node, constants={"sizes": (1, 8, 30, 36)})
    assert "scales (1.0, 1.0, 3.0, 3.0)" in one(node).message


@pytest.mark.parametrize(
    "attrs, scales, text",
    [
        ({"mode": "nearest"}, (1.0, 1.0, 3.0, 3.0), "scales (1.0, 1.0, 3.0, 3.0)"),
        ({"mode": "linear"}, (1.0, 1.0, 2.0, 2.0), "mode 'linear'"),
        ({"mode": "cubic"}, (1.0, 1.0, 4.0, 4.0), "mode 'cubic' and scales"),
        ({"mode": "nearest"}, (1.0, 1.0, 2.0, 1.0), "scales (1.0, 1.0, 2.0, 1.0)"),
        ({"mode": "nearest"}, (1.0, 1.0, 0.5, 0.5), "scales (1.0, 1.0, 0.5, 0.5)"),
        ({"mode": "nearest"}, (1.0, 2.0, 2.0, 2.0), "scales (1.0, 2.0, 2.0, 2.0)"),
    ],
)
def test_other_resizes_are_errors(attrs, scales, text):
    f = one(NodeView("up", "Resize", attrs, constants={"scales": scales}))
    assert (f.rule, f.severity) == ("upsample", Severity.ERROR)
    assert text in f.message and "only 2x" in f.message


def test_unknown_scales_are_an_error():
    f = one(NodeView("up", "Resize", {"mode": "nearest"}))
    assert f.severity is Severity.ERROR and "cannot be determined" in f.message


@pytest.mark.parametrize(
    "transform, rounding, ok",
    [
        ("half_pixel", "round_prefer_floor", True),  # ONNX defaults
        ("asymmetric", "floor", True),  # PyTorch's nearest export
        ("half_pixel", "floor", False),  # maps output 0 to input -1 -> clamped, shifted
        ("asymmetric", "ceil", False),
        ("align_corners", "round_prefer_floor", False),
    ],
)
def test_resize_coordinate_modes(transform, rounding, ok):
    attrs = {
        "mode": "nearest",
        "coordinate_transformation_mode": transform,
        "nearest_mode": rounding,
    }
    f = one(NodeView("up", "Resize", attrs, constants={"scales": (1, 1, 2, 2)}))
    assert (f is None) == ok
    if f is not None:
        assert f.severity is Severity.WARNING and "2x2 block" in f.message


def test_findings_keep_node_order_and_names():
    nodes = [
        NodeView("conv1", "Conv", {"group": 1}, weight_shape=(8, 3, 3, 3)),
        NodeView("pool1", "MaxPool", {"kernel_shape": (2, 2)}),
        NodeView("dw", "Conv", {"group": 8}, weight_shape=(8, 1, 3, 3)),
        NodeView("up", "Resize", {"mode": "linear"}, constants={"scales": (1, 1, 2, 2)}),
        NodeView("relu", "Relu"),
    ]
    assert [(f.node, f.rule) for f in lint_nnie(nodes)] == [
        ("pool1", "pool_ceil_mode"),
        ("dw", "depthwise_conv"),
        ("up", "upsample"),
    ]
