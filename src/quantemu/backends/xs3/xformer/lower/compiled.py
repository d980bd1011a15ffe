"""A model compiled by xcore-opt 1.4.2 (``*.xcore.tflite``), simulated as compiled.

The TFLite importer turns each XMOS custom operator into a ``TfliteCustom`` node (its
``custom_code``, raw flexbuffer ``custom_options``, output shapes; constant inputs as
initializers whose stored integers are ``graph.quant_overrides[name].values``). This rule reads
the parameters the compiler wrote into the file instead of deriving them again, and runs the
arithmetic of lib_nn's reference C (what the 1.4.2 host interpreter runs), facts in
``notes/xformer.md``:

===================  ==========================================================================
custom op            layer
===================  ==========================================================================
``XC_conv2d_v2``     exact sums over the raw int8 input (the Padded kernels pad with the stored
                     pad value), then the group or channelwise output transform with the
                     int16 mul/bias/shift tensor and ``final_shr`` read from the file
``XC_pad``           byte copy into a frame filled with the stored byte
``XC_pad_3_to_4``    a fourth byte per pixel (the low byte of ``pv``); ``XC_pad_1_to_4``:
                     three (a CONV_2D on one input channel)
``XC_slice``         ``n`` copies of ``l`` bytes from ``s + i * o``
``XC_no_op``         the identity (a reshape the memory planner aliases)
``XC_add``           ``clamp((bias + x1 * m1 + x2 * m2 + 2**(shift-1)) >> shift)``
``XC_lookup``        ``T[uint8(x)]`` with the stored 256-byte table
``XC_mean``          int32 sum, then float32 ``acc * sm + zp_out``, clamped, ``roundf``
``XC_maxpool2d``     the maximum of each VALID window of raw codes
``XC_mul``           lib_nn ``mul_elementwise`` with the stored ``nn_mul_params_t``
``XC_concat``        ``n`` times, ``s[k]`` bytes of each input ``k`` in turn
``XC_broadcast``     each of ``b`` blocks of ``s`` bytes repeated ``n`` times
``XC_softmax``,      lib_nn's float32 softmax over the last axis with the stored exp table
``XC_batched_...``   (:mod:`.softmax`)
===================  ==========================================================================

Activations are NHWC, batch first, as the importer keeps them for custom operators; the byte
ops work on each sample's bytes. A constant operand (an initializer) enters with batch 1 and
broadcasts over the samples. Any other ``XC_`` operator is an UnsupportedError. The layers are
in :mod:`.compiled_layers`.
"""

from __future__ import annotations

import struct

import numpy as np

from quantemu.backends.xs3.xformer.compiled import (
    conv2d_v2_params,
    decode_options,
    pad_params,
    pool_window,
)
from quantemu.backends.xs3.xformer.lower.compiled_layers import (
    NOTE,
    XcAddLayer,
    XcBroadcastLayer,
    XcConcatLayer,
    XcConvCompiledLayer,
    XcLookupLayer,
    XcMaxPoolLayer,
    XcMeanLayer,
    XcMulLayer,
    XcPadLayer,
    XcPadTo4Layer,
    XcSliceLayer,
)
from quantemu.backends.xs3.xformer.lower.softmax import decode_xc_softmax
from quantemu.backends.xs3.xformer.mul import XcMulParams
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Layer


def _stored(ctx, node: Node, index: int, what: str) -> np.ndarray:
    """The integers stored in constant input ``index`` (dtype kept)."""
    name = node.inputs[index] if index < len(node.inputs) else ""
    override = ctx.graph.quant_overrides.get(name)
    if (
        not name
        or name not in ctx.graph.initializers
        or override is None
        or override.values is None
    ):
        raise InvalidInputError(
            f"{node}: input {index} ({name or 'absent'}) of {node.attrs['custom_code']} should "
            f"be the constant {what} stored in the file"
        )
    return np.asarray(override.values)


def _shapes(ctx, node: Node) -> tuple[tuple, tuple]:
    """The per-sample NHWC shapes of the first input and of the output, from the file."""
    name = node.inputs[0]
    const = ctx.const(name)
    x = (1, *const.shape) if const is not None and const.ndim < 2 else ctx.shape(name)
    y = tuple(node.attrs["output_shapes"][0])
    return tuple(x[1:]), y[1:]


def _constants(ctx, node: Node, count: int) -> tuple:
    """The first ``count`` operands: a constant's stored codes as ``(1, bytes)``, else None."""
    return tuple(
        _stored(ctx, node, i, "operand").reshape(1, -1)
        if node.inputs[i] in ctx.graph.initializers
        else None
        for i in range(count)
    )


def _byte_layer(ctx, node: Node, cls, **fields) -> Layer:
    """A layer that moves codes: its output encoding is its output's (the file's)."""
    code = node.attrs["custom_code"]
    _, y = _shapes(ctx, node)
    return ctx.layer(
        cls, node, op=code, note=NOTE, out_shape=y, encoding=ctx.encoding(node.outputs[0]), **fields
    )


def _check_bytes(node: Node, produced: int, out_shape: tuple) -> None:
    if produced != int(np.prod(out_shape)):
        raise InvalidInputError(
            f"{node}: {node.attrs['custom_code']}'s options produce {produced} bytes per sample, "
            f"its output {out_shape} holds {int(np.prod(out_shape))}"
        )


def _conv(ctx, node: Node, opts: dict) -> Layer:
    x, y = _shapes(ctx, node)
    x = (1,) * (3 - len(x)) + x  # a (1, C) input (an FC right after XC_mean) is (1, 1, 1, C)
    weights = _stored(ctx, node, 1, "weights")
    ot_data = _stored(ctx, node, 2, "int16 multipliers and biases")
    params = conv2d_v2_params(
        opts, (1, *x), (1, *y), weights, ot_data, tensors=(node.inputs[0], node.outputs[0])
    )
    if params.kernel_type.depthwise and x[-1] != y[-1]:
        raise UnsupportedError(
            f"{node}: a depthwise XC_conv2d_v2 from {x[-1]} to {y[-1]} channels, which "
            "xcore-opt 1.4.2 builds for a depth multiplier above 1 with its filter laid out for "
            "the input channels only; XMOS's interpreter then computes values unrelated to the "
            "convolution, which quantemu does not emulate (kept.py). Remedy: depth multiplier 1"
        )
    return _byte_layer(ctx, node, XcConvCompiledLayer, params=params, rounding=ctx.options.vlashr)


def _pad(ctx, node: Node, opts: dict) -> Layer:
    pad = pad_params(opts, (node.inputs[0], node.outputs[0]))
    x, y = _shapes(ctx, node)
    if (pad.copies + 1) * pad.size != int(np.prod(x)):
        raise InvalidInputError(f"{node}: XC_pad copies {pad.copies + 1} x {pad.size} bytes of {x}")
    _check_bytes(
        node, pad.start + (pad.copies + 1) * pad.size + pad.copies * pad.pad_size + pad.end, y
    )
    return _byte_layer(ctx, node, XcPadLayer, pad=pad)


def _pad_to_4(ctx, node: Node, opts: dict) -> Layer:
    depth = {"XC_pad_3_to_4": 3, "XC_pad_1_to_4": 1}[node.attrs["custom_code"]]
    x, y = _shapes(ctx, node)
    if x[-1] != depth:
        code = node.attrs["custom_code"]
        raise InvalidInputError(f"{node}: {code} on {x}: the last axis must be {depth}")
    _check_bytes(node, int(np.prod(x)) // depth * 4, y)
    value = ((int(opts.get("pv", 0)) & 0xFF) ^ 0x80) - 0x80  # the low byte, signed
    return _byte_layer(ctx, node, XcPadTo4Layer, value=value, depth=depth)


def _slice(ctx, node: Node, opts: dict) -> Layer:
    start, offset, size, copies = (int(opts.get(k, 0)) for k in ("s", "o", "l", "n"))
    x, y = _shapes(ctx, node)
    index = start + (np.arange(copies)[:, None] * offset + np.arange(size)).reshape(-1)
    if index.size and (index.min() < 0 or index.max() >= int(np.prod(x))):
        raise InvalidInputError(f"{node}: XC_slice {opts} reads outside its input {x}")
    _check_bytes(node, index.size, y)
    return _byte_layer(ctx, node, XcSliceLayer, index=index)


def _no_op(ctx, node: Node, opts: dict) -> Layer:
    x, y = _shapes(ctx, node)
    _check_bytes(node, int(np.prod(x)), y)
    return _byte_layer(ctx, node, XcSliceLayer, index=None)


def _add(ctx, node: Node, opts: dict) -> Layer:
    try:
        m1, m2, bias, shift = (int(opts[k]) for k in ("m1", "m2", "bias", "shift"))
    except KeyError as exc:
        raise UnsupportedError(f"{node}: XC_add options {sorted(opts)} lack {exc}") from None
    if not 1 <= shift <= 31:
        raise UnsupportedError(f"{node}: XC_add with shift {shift} (lib_nn needs 1..31)")
    fields = {"m1": m1, "m2": m2, "bias": bias, "shift": shift}
    return _byte_layer(ctx, node, XcAddLayer, constants=_constants(ctx, node, 2), **fields)


def _lookup(ctx, node: Node, opts: dict) -> Layer:
    table = _stored(ctx, node, 1, "256-entry table").view(np.int8).reshape(-1)
    if table.size != 256:
        raise InvalidInputError(f"{node}: XC_lookup table has {table.size} entries, not 256")
    return _byte_layer(ctx, node, XcLookupLayer, table=np.ascontiguousarray(table))


def _mean(ctx, node: Node, opts: dict) -> Layer:
    try:
        dims = tuple(int(opts[k]) for k in ("s", "m", "e"))
        zp_in, zp_out, scale_mul = (float(opts[k]) for k in ("i", "o", "sm"))
    except KeyError as exc:
        raise UnsupportedError(f"{node}: XC_mean options {sorted(opts)} lack {exc}") from None
    x, y = _shapes(ctx, node)
    if dims[0] * dims[1] * dims[2] != int(np.prod(x)):
        raise InvalidInputError(f"{node}: XC_mean dims {dims} do not cover its input {x}")
    _check_bytes(node, dims[0] * dims[2], y)
    fields = {"dims": dims, "zp_in": zp_in, "zp_out": zp_out, "scale_mul": scale_mul}
    return _byte_layer(ctx, node, XcMeanLayer, **fields)


def _maxpool(ctx, node: Node, opts: dict) -> Layer:
    x, y = _shapes(ctx, node)
    kernel, stride = pool_window(opts, (1, *x), (1, *y))
    return _byte_layer(ctx, node, XcMaxPoolLayer, kernel=kernel, stride=stride)


def _mul(ctx, node: Node, opts: dict) -> Layer:
    raw = opts.get("mp", b"")
    if not isinstance(raw, bytes) or len(raw) < 8:
        raise UnsupportedError(f"{node}: XC_mul options {sorted(opts)} hold no nn_mul_params_t")
    params = XcMulParams.from_blob(raw[:8])
    return _byte_layer(ctx, node, XcMulLayer, constants=_constants(ctx, node, 2), params=params)


def _concat(ctx, node: Node, opts: dict) -> Layer:
    count, copies = int(opts.get("i", 0)), int(opts.get("n", 0))
    # the stored vector has a fixed length; entries past the inputs are not initialized
    sizes = tuple(int(v) for v in opts.get("s", [])[:count])
    if count != len(node.inputs) or len(sizes) != count:
        raise InvalidInputError(f"{node}: XC_concat of {count} inputs, sizes {sizes}")
    _, y = _shapes(ctx, node)
    _check_bytes(node, copies * sum(sizes), y)
    fields = {"copies": copies, "sizes": sizes}
    return _byte_layer(ctx, node, XcConcatLayer, constants=_constants(ctx, node, count), **fields)


def _broadcast(ctx, node: Node, opts: dict) -> Layer:
    size, copies, outer = (int(opts.get(k, 0)) for k in ("s", "n", "b"))
    x, y = _shapes(ctx, node)
    if outer * size != int(np.prod(x)):
        raise InvalidInputError(f"{node}: XC_broadcast {opts} does not cover its input {x}")
    _check_bytes(node, outer * copies * size, y)
    fields = {"outer": outer, "copies": copies, "size": size}
    return _byte_layer(ctx, node, XcBroadcastLayer, constants=_constants(ctx, node, 1), **fields)


DECODERS = {
    "XC_conv2d_v2": _conv,
    "XC_pad": _pad,
    "XC_pad_3_to_4": _pad_to_4,
    "XC_pad_1_to_4": _pad_to_4,
    "XC_slice": _slice,
    "XC_no_op": _no_op,
    "XC_add": _add,
    "XC_lookup": _lookup,
    "XC_mean": _mean,
    "XC_maxpool2d": _maxpool,
    "XC_mul": _mul,
    "XC_concat": _concat,
    "XC_broadcast": _broadcast,
    "XC_softmax": decode_xc_softmax,
    "XC_batched_softmax": decode_xc_softmax,
}


def lower_compiled(ctx, node: Node) -> Layer:
    """A ``TfliteCustom`` node of a compiled model as the layer of its XC op (module doc)."""
    code = node.attrs.get("custom_code", "")
    decoder = DECODERS.get(code)
    if decoder is None:
        raise UnsupportedError(
            f"{node}: the compiled operator {code!r} is not simulated; supported: "
            f"{', '.join(DECODERS)}. Run the int8 model it was compiled from instead"
        )
    options = decode_options(node.attrs.get("custom_options", b""))
    if not isinstance(options, dict):
        raise InvalidInputError(f"{node}: its custom options are not a flexbuffer map")
    try:
        return decoder(ctx, node, options)
    except (TypeError, AttributeError, ValueError, KeyError, IndexError, struct.error) as exc:
        # A corrupt file gives options or parameter tensors of the wrong kind or size.
        raise InvalidInputError(
            f"{node}: the compiled operator's options or parameters are malformed "
            f"({type(exc).__name__}: {exc}); compile the model again with xcore-opt"
        ) from None
