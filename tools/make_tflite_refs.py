"""Build the int8 TFLite / xcore-opt reference set in ``tests/data/tflite_refs/``.

    /work/tfenv/bin/python tools/make_tflite_refs.py              # every model
    /work/tfenv/bin/python tools/make_tflite_refs.py add mean_gap  # only these (manifest merged)

Needs a venv with TensorFlow 2.17 + tf_keras, ai-edge-litert, tflite-micro and
xmos-ai-tools 1.4.2; none of them is a quantemu dependency. Same layout as the public set
``../shared/conformance/models/xs3/`` (see its README), for the operators that set lacks.

Per model NAME: a seeded tf_keras model is converted to full-integer int8 (64 seeded
representative samples), compiled by xcore-opt with default options, and run on 6 seeded
int8 inputs by every peer runtime (``tflite_refs_run.py``). Weights come from a numpy
Generator, not from Keras initialisers, so that reruns give identical bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# xformer.convert runs ``xcore-opt`` from PATH; it sits beside this interpreter in the venv.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

import numpy as np
import tensorflow as tf
import tf_keras as keras
from ai_edge_litert.interpreter import OpResolverType

import tflite_refs_run as rr
import tflite_refs_tokens as tok

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "tflite_refs"
N_INPUTS = 6
N_LAYER_INPUTS = 2
N_REP = 64
L = keras.layers

# ---------------------------------------------------------------- builders
# Each builder maps the Keras input tensor to the output tensor; ``c`` is the channel count.


def _conv1x1(x, c, act=None):
    return L.Conv2D(c, 1, activation=act)(x)


def b_add(x, c):
    return L.Add()([x, _conv1x1(x, c)])


def b_add_relu(x, c):
    return L.ReLU()(L.Add()([x, _conv1x1(x, c)]))


def b_sub(x, c):
    return L.Subtract()([x, _conv1x1(x, c)])


def b_mul(x, c):
    return L.Multiply()([x, _conv1x1(x, c)])


def _channel_const(c, lo, hi):
    return tf.constant(np.linspace(lo, hi, c), tf.float32)


def b_mul_channel_const(x, c):
    k = _channel_const(c, -2.0, 3.0)
    return L.Lambda(lambda t: t * k)(x)


def b_add_channel_const(x, c):
    k = _channel_const(c, -0.75, 1.25)
    return L.Lambda(lambda t: t + k)(x)


def b_maxpool_same(x, c):
    return L.MaxPool2D(3, 2, padding="same")(x)


def b_maxpool_valid(x, c):
    return L.MaxPool2D(2, 2, padding="valid")(x)


def b_avgpool_same(x, c):
    return L.AveragePooling2D(3, 2, padding="same")(x)


def b_avgpool_valid(x, c):
    return L.AveragePooling2D(3, 2, padding="valid")(x)


def b_mean_gap(x, c):
    return L.GlobalAveragePooling2D()(x)


def b_mean_gap_keepdims(x, c):
    return L.GlobalAveragePooling2D(keepdims=True)(x)


def b_concat(x, c):
    # tanh's int8 output has a fixed scale (1/128), so the converter cannot give it the
    # concatenation's scale: it requantizes with QUANTIZE.
    wide = L.Conv2D(c // 2, 1)(x)
    return L.Concatenate()([L.Activation("tanh")(x), wide, x])


def b_softmax(x, c):
    return L.Softmax()(L.Dense(10)(L.Flatten()(x)))


def _act(name):
    return lambda x, c: L.Activation(name)(x)


def b_relu6(x, c):
    return L.ReLU(6.0)(x)


def b_leaky_relu(x, c):
    return L.LeakyReLU(0.2)(x)


def b_hard_swish(x, c):
    # The converter recognises x * relu6(x + 3) / 6 and emits HARD_SWISH.
    return L.Lambda(lambda t: t * tf.nn.relu6(t + 3.0) * (1.0 / 6.0))(x)


def b_pad(x, c):
    return L.ZeroPadding2D(((1, 2), (2, 1)))(x)


def b_conv_relu6_zp(x, c):
    # The concatenation forces its scale/zero point onto the RELU6 conv output (zp != -128),
    # so xcore-opt splits the activation out into XC_lookup.
    return L.Concatenate()([L.Conv2D(c, 3, padding="same", activation="relu6")(x), _conv1x1(x, c)])


def b_dw_relu6_zp(x, c):
    dw = L.DepthwiseConv2D(3, padding="same", activation="relu6")(x)
    return L.Concatenate()([dw, x])


def b_mixed(x, c):
    """MobileNet-like: stem conv, two inverted-residual-ish blocks (one with a residual ADD),
    global average pool, dense, softmax."""
    y = L.Conv2D(8, 3, strides=2, padding="same", activation="relu6")(x)
    r = L.DepthwiseConv2D(3, padding="same", activation="relu6")(y)
    r = L.Conv2D(8, 1)(r)
    y = L.Add()([y, r])
    y = L.Conv2D(16, 1, activation="relu6")(y)
    y = L.DepthwiseConv2D(3, strides=2, padding="same", activation="relu6")(y)
    y = L.Conv2D(16, 1)(y)
    y = L.GlobalAveragePooling2D()(y)
    return L.Softmax()(L.Dense(10)(y))


def b_conv_same(x, c):
    return L.Conv2D(8, 3, padding="same")(x)


def b_conv_valid(x, c):
    return L.Conv2D(8, 3, padding="valid")(x)


def b_fallback_chain(x, c):
    # The first conv falls back to TFL CONV_2D; the ops around it are still compiled.
    y = L.Conv2D(8, 3, padding="same")(x)
    y = L.MaxPool2D(2, 2)(y)
    return L.DepthwiseConv2D(3, padding="same", activation="relu")(y)


BUILDERS = {k[2:]: v for k, v in globals().items() if k.startswith("b_")}
BUILDERS.update({n: _act(n) for n in ("relu", "tanh", "sigmoid")})
BUILDERS.update(tok.BUILDERS)


# ---------------------------------------------------------------- weights


def _fan_in(shape, name):
    if "depthwise" in name:
        return int(np.prod(shape[:2]))
    return int(np.prod(shape[:-1]))


def seed_weights(model, rng, opts):
    """Kernels ~ N(0, 2/fan_in), biases ~ U(-0.1, 0.1), then the stress options on the first
    layer: ``spread`` (decades) scales its output channels by log-uniform factors;
    ``near_const`` = (k, sigma) sets the kernels of its first k output channels to
    1 + sigma * N(0, 1) and its biases to 0. Calibrated on ``sparse`` data, such channels give a
    huge output offset at input code 0 (xcore-opt's cbias), which defeats its group output
    transform (channelwise instead, or the unoptimized fallback)."""
    for w in model.weights:
        shape = tuple(w.shape)
        if "bias" in w.name:
            val = rng.uniform(-0.1, 0.1, shape)
        elif (val := tok.norm_weight(w.name, shape, rng)) is None:
            val = rng.normal(0.0, np.sqrt(2.0 / _fan_in(shape, w.name)), shape)
        w.assign(val.astype(np.float32))
    if not {"spread", "near_const"} & set(opts):
        return
    kernel, bias = model.weights[0], model.weights[1]
    if "spread" in opts:
        scale = 10.0 ** np.linspace(-opts["spread"], 0.0, kernel.shape[-1])
        kernel.assign((kernel.numpy() * scale).astype(np.float32))
    if "near_const" in opts:
        k, sigma = opts["near_const"]
        val = kernel.numpy()
        val[..., :k] = 1.0 + sigma * rng.normal(size=val[..., :k].shape)
        kernel.assign(val.astype(np.float32))
        bias.assign(np.zeros(bias.shape, np.float32))


def rep_samples(spec):
    """64 calibration samples: uniform(rep_range), or ``sparse``: zeros with a single 1.0."""
    rng = np.random.default_rng(spec["model_seed"] + 1)
    shape = (1, *spec["shape"])
    for _ in range(N_REP):
        if spec["options"].get("rep") == "sparse":
            a = np.zeros(shape, np.float32)
            a[(0, *(int(rng.integers(0, d)) for d in spec["shape"]))] = 1.0
            yield [a]
        else:
            yield [rng.uniform(*spec["rep_range"], shape).astype(np.float32)]


def make_inputs(spec):
    """Uniform int8 codes, or ``sparse``: the input zero point's code -128 except ~1/16 of the
    elements (a near-constant filter saturates on dense random codes)."""
    rng = np.random.default_rng(spec["input_seed"])
    x = rng.integers(-128, 128, (N_INPUTS, *spec["shape"]), dtype=np.int8)
    if spec["options"].get("inputs") == "sparse":
        x = np.where(rng.random(x.shape) < 1 / 16, x, np.int8(-128)).astype(np.int8)
    return x


# ---------------------------------------------------------------- the set
# name: builder, per-sample input (h, w, c) or (tokens, dim), representative range, seeds,
# extra options. The token-shaped (transformer) models are in tflite_refs_tokens.SPECS.


def _stress(k, sigma):
    return {"near_const": [k, sigma], "rep": "sparse", "inputs": "sparse"}


SPECS = [
    # name, builder, input shape, rep_range, model_seed, input_seed, options
    ("add", "add", (8, 8, 8), (-1.0, 1.0), 14000, 14001, {}),
    ("add_relu", "add_relu", (8, 8, 8), (-1.0, 1.0), 14010, 14011, {}),
    ("sub", "sub", (8, 8, 8), (-1.0, 1.0), 14020, 14021, {}),
    ("mul", "mul", (8, 8, 8), (-1.0, 1.0), 14030, 14031, {}),
    ("mul_channel_const", "mul_channel_const", (8, 8, 8), (-1.0, 1.0), 14040, 14041, {}),
    ("add_channel_const", "add_channel_const", (8, 8, 8), (-1.0, 1.0), 14050, 14051, {}),
    ("maxpool_same", "maxpool_same", (8, 8, 8), (-1.0, 1.0), 14060, 14061, {}),
    ("maxpool_valid", "maxpool_valid", (8, 8, 8), (-1.0, 1.0), 14070, 14071, {}),
    ("avgpool_same", "avgpool_same", (9, 9, 8), (-1.0, 1.0), 14080, 14081, {}),
    ("avgpool_valid", "avgpool_valid", (9, 9, 8), (-1.0, 1.0), 14090, 14091, {}),
    ("mean_gap", "mean_gap", (8, 8, 8), (-1.0, 1.0), 14100, 14101, {}),
    ("mean_gap_keepdims", "mean_gap_keepdims", (8, 8, 8), (-1.0, 1.0), 14110, 14111, {}),
    ("concat", "concat", (8, 8, 8), (-1.0, 1.0), 14120, 14121, {}),
    ("softmax", "softmax", (4, 4, 2), (-1.0, 1.0), 14130, 14131, {}),
    ("logistic", "sigmoid", (8, 8, 8), (-6.0, 6.0), 14140, 14141, {}),
    ("tanh", "tanh", (8, 8, 8), (-3.0, 3.0), 14150, 14151, {}),
    ("relu", "relu", (8, 8, 8), (-1.0, 1.0), 14160, 14161, {}),
    ("relu6", "relu6", (8, 8, 8), (-2.0, 8.0), 14170, 14171, {}),
    ("leaky_relu", "leaky_relu", (8, 8, 8), (-1.0, 1.0), 14180, 14181, {}),
    ("hard_swish", "hard_swish", (8, 8, 8), (-5.0, 5.0), 14190, 14191, {}),
    ("pad", "pad", (8, 8, 8), (-1.0, 1.0), 14200, 14201, {}),
    ("conv_relu6_zp", "conv_relu6_zp", (8, 8, 8), (-1.0, 1.0), 14210, 14211, {}),
    ("dw_relu6_zp", "dw_relu6_zp", (8, 8, 8), (-1.0, 1.0), 14220, 14221, {}),
    ("mixed_mobilenet", "mixed", (32, 32, 3), (0.0, 1.0), 14300, 14301, {}),
    ("conv_scale_spread", "conv_same", (8, 8, 8), (-1.0, 1.0), 14400, 14401, {"spread": 6}),
    ("conv_channelwise_ot", "conv_valid", (8, 8, 8), (0.0, 1.0), 14410, 14411, _stress(1, 0.1)),
    ("conv_fallback", "conv_valid", (8, 8, 8), (0.0, 1.0), 14420, 14421, _stress(4, 0.05)),
    ("conv_fallback_same", "conv_same", (8, 8, 8), (0.0, 1.0), 14430, 14431, _stress(4, 0.05)),
    ("fallback_chain", "fallback_chain", (8, 8, 8), (0.0, 1.0), 14440, 14441, _stress(4, 0.05)),
    *tok.SPECS,
]

SPEC_KEYS = ("name", "builder", "shape", "rep_range", "model_seed", "input_seed", "options")


def build_keras(spec):
    keras.backend.clear_session()
    inp = keras.Input(spec["shape"], batch_size=1)
    model = keras.Model(inp, BUILDERS[spec["builder"]](inp, spec["shape"][-1]))
    seed_weights(model, np.random.default_rng(spec["model_seed"]), spec["options"])
    return model


def convert_int8(model, spec) -> bytes:
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]

    conv.representative_dataset = lambda: rep_samples(spec)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return conv.convert()


# ---------------------------------------------------------------- one model


def _sha(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


def _outputs(model, int8, xcore, x, notes):
    inp, out = rr.io_info(int8)
    y = {
        "y_xcore": rr.xmos_or_note(xcore, x, notes, "y_xcore", "xcore"),
        "y_tflite_ref": rr.run_litert(int8, x, OpResolverType.BUILTIN_REF),
        "y_tflm": rr.run_tflm(int8, x),
        "y_xcore_on_int8": rr.xmos_or_note(int8, x, notes, "y_xcore_on_int8", "int8"),
    }
    xf = ((x.astype(np.float32) - inp["zero_point"]) * inp["scale"]).astype(np.float32)
    y["y_float"] = np.stack([model(xi[None]).numpy()[0] for xi in xf]).astype(np.float32)
    builtin = rr.run_litert(int8, x, OpResolverType.BUILTIN)
    ref, fq = y["y_tflite_ref"], rr.requantize(y["y_float"], out)
    stats = {
        "xcore_vs_tflite_ref": y["y_xcore"],
        "tflite_builtin_vs_ref": builtin,
        "tflm_vs_tflite_ref": y["y_tflm"],
        "xcore_on_int8_vs_tflite_ref": y["y_xcore_on_int8"],
    }
    stats = {k: rr.diff_stats(v, ref) for k, v in stats.items() if v is not None}
    stats["tflite_ref_vs_float_requantized"] = rr.diff_stats(ref, fq)
    if y["y_xcore"] is not None:
        stats["xcore_vs_float_requantized"] = rr.diff_stats(y["y_xcore"], fq)
    stats["frac_outputs_at_int8_rail_tflite_ref"] = float(np.isin(ref, (-128, 127)).mean())
    return {k: v for k, v in y.items() if v is not None}, stats


def _layers(int8, xcore, x, y):
    xl = x[:N_LAYER_INPUTS]
    ref, ref_meta = rr.capture_ref(int8, xl)
    # The captures must agree with the plain runs wherever they overlap.
    last_ref = ref[ref_meta[-1]["key"]]
    assert np.array_equal(last_ref, y["y_tflite_ref"][:N_LAYER_INPUTS]), "ref capture"
    xc, xc_meta = {}, []
    if "y_xcore" in y:  # else the XMOS runtime cannot run the xcore model (notes)
        xc, xc_meta = rr.capture_xcore(xcore, xl)
        last_xc = [m for m in xc_meta if m["key"]][-1]
        got = xc[last_xc["key"]].reshape(y["y_xcore"][:N_LAYER_INPUTS].shape)
        assert np.array_equal(got, y["y_xcore"][:N_LAYER_INPUTS]), "xcore capture"
    arrays = {"x_int8": xl, **xc, **ref}
    info = {
        "n_inputs": N_LAYER_INPUTS,
        "xcore_tensors": xc_meta,
        "ref_tensors": ref_meta,
        "xcore_vs_ref_per_layer": rr.pair_layers(ref, ref_meta, xc, xc_meta),
    }
    return arrays, info


def make_one(spec) -> dict:
    name = spec["name"]
    model = build_keras(spec)
    int8 = convert_int8(model, spec)
    int8_path = OUT / f"{name}.int8.tflite"
    int8_path.write_bytes(int8)
    notes = {}
    compiled = rr.attempt(notes, "xcore_opt", "no .xcore.tflite", rr.run_xformer, int8_path, name)
    xcore, xinfo = compiled or (None, None)
    if xcore is not None:
        (OUT / f"{name}.xcore.tflite").write_bytes(xcore)
    inp, out = rr.io_info(int8)
    x = make_inputs(spec)
    y, stats = _outputs(model, int8, xcore, x, notes)
    np.savez_compressed(OUT / f"{name}.npz", x_int8=x, **y)
    larrays, linfo = _layers(int8, xcore, x, y)
    np.savez_compressed(OUT / f"{name}.layers.npz", **larrays)
    sha = {"int8.tflite": _sha(int8)} | ({"xcore.tflite": _sha(xcore)} if xcore else {})
    entry = {
        "model_seed": spec["model_seed"],
        "input_seed": spec["input_seed"],
        "rep_range": list(spec["rep_range"]),
        "builder": spec["builder"],
        "builder_kwargs": tok.builder_kwargs(spec["shape"]),
        "options": spec["options"],
        "n_inputs": N_INPUTS,
        "input": inp,
        "output": out,
        "int8_ops": rr.op_list(int8),
        **rr.xcore_entry(xcore, xinfo),
        "sha256": sha,
        "stats": stats,
        "layers": linfo,
    }
    if notes:
        entry["notes"] = notes
    import tflite_refs_float as rf  # noqa: PLC0415 (it imports this module)

    if name in rf.FLOAT_EXPORT:
        entry.update(rf.write_float(model, spec, OUT))
    return entry


# ---------------------------------------------------------------- manifest


COMMANDS = {
    "generate": "/work/tfenv/bin/python tools/make_tflite_refs.py",
    "convert": (
        "tf_keras model (batch_size=1 input), weights from numpy default_rng(model_seed): kernels "
        "N(0, 2/fan_in), biases U(-0.1, 0.1); tf.lite.TFLiteConverter.from_keras_model(model); "
        "optimizations=[Optimize.DEFAULT]; representative_dataset = 64 samples "
        "default_rng(model_seed + 1).uniform(rep_range); target_spec.supported_ops="
        "[TFLITE_BUILTINS_INT8]; inference_input_type=inference_output_type=int8"
    ),
    "xformer": (
        "xmos_ai_tools.xformer.convert(MODEL.int8.tflite, MODEL.xcore.tflite, None), i.e. "
        "xcore-opt -o MODEL.xcore.tflite MODEL.int8.tflite (default options)"
    ),
    "y_xcore": (
        "xmos_ai_tools.xinterpreters.TFLMHostInterpreter(); set_model(model_content="
        "MODEL.xcore.tflite); set_tensor(0, x[None]); invoke(); get_tensor(output tensor index)"
    ),
    "y_xcore_on_int8": "same TFLMHostInterpreter on MODEL.int8.tflite (not compiled)",
    "y_tflite_ref": (
        "ai_edge_litert.interpreter.Interpreter(model_content=MODEL.int8.tflite, "
        "experimental_op_resolver_type=OpResolverType.BUILTIN_REF)"
    ),
    "y_tflite_builtin (stats only)": "same with OpResolverType.BUILTIN",
    "y_tflm": (
        "tflite_micro.python.tflite_micro.runtime.Interpreter.from_bytes(MODEL.int8.tflite, "
        "arena_size=8MiB)"
    ),
    "y_float": "tf_keras model(float32((x_int8 - in_zero_point) * in_scale)), float32",
    "float_requantized": "clip(round_half_even(y_float / out_scale) + out_zero_point, -128, 127)",
    "inputs": (
        f"x_int8 = np.random.default_rng(input_seed).integers(-128, 128, ({N_INPUTS},) + "
        "input_shape[1:], int8)"
    ),
}

LAYERS_NPZ = (
    f"MODEL.layers.npz: x_int8 and per-op outputs for the first {N_LAYER_INPUTS} inputs. "
    "xcore_NN: every op output of MODEL.xcore.tflite, from TFLMHostInterpreter on a copy of the "
    "model in which all op outputs are subgraph outputs and the OfflineMemoryAllocation "
    "metadata is removed (XC_no_op outputs are not captured: they alias their input; in that "
    "copy the no_op's consumers read its input tensor instead). ref_NN: "
    "every op output of MODEL.int8.tflite from LiteRT BUILTIN_REF with "
    "experimental_preserve_all_tensors=True. Batch dim of 1 replaced by the input index (a "
    "tensor whose first dim is not 1, e.g. a token model's (16, 32) reshape, is kept whole). "
    "Pairing in models[MODEL].layers.xcore_vs_ref_per_layer: same element count, scale and "
    "zero point; among several candidates the closest in values (ties: the later op)."
)


SCRIPT = "tools/make_tflite_refs.py (+ tools/tflite_refs_run.py, tools/tflite_refs_float.py)"


def main(argv: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    specs = [dict(zip(SPEC_KEYS, s, strict=True)) for s in SPECS]
    if argv:
        unknown = set(argv) - {s["name"] for s in specs}
        if unknown:
            raise SystemExit(f"unknown model(s) {sorted(unknown)}")
        specs = [s for s in specs if s["name"] in argv]
    path = OUT / "MANIFEST.json"
    old = json.loads(path.read_text())["models"] if argv and path.exists() else {}
    models = dict(old)
    for spec in specs:
        print(f"[make_tflite_refs] {spec['name']}", file=sys.stderr, flush=True)
        models[spec["name"]] = make_one(spec)
    import tflite_refs_float as rf  # noqa: PLC0415 (it imports this module)

    COMMANDS["float_onnx"] = rf.COMMAND
    order = [s[0] for s in SPECS]
    manifest = {
        "set": "quantemu issue 14: operators beyond the public xs3 set",
        "versions": rr.versions(),
        "commands": COMMANDS,
        "script": SCRIPT,
        "layers_npz": LAYERS_NPZ,
        "models": {k: models[k] for k in order if k in models},
    }
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
