"""Make the float-input/float-output int8 TFLite reference (QUANTIZE in, DEQUANTIZE out).

Run with TensorFlow 2.17 + tf_keras + ai-edge-litert + tflite-micro installed (not quantemu's
dependencies): ``python tools/make_tflite_float_io.py [OUT_DIR]`` (default
tests/data/tflite_float_io). Writes ``float_io.int8.tflite`` (TFLiteConverter with a seeded
representative dataset, int8 kernels, float32 input and output) and ``float_io.npz``: ``x``
(float32 inputs, NHWC), ``y_tflite_ref`` (LiteRT BUILTIN_REF) and ``y_tflm`` (TFLite-Micro).
Deterministic: seeded weights and data.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def build(out: Path) -> None:
    import tensorflow as tf  # noqa: PLC0415 (a generator-only dependency)
    import tf_keras as keras  # noqa: PLC0415

    keras.utils.set_random_seed(7100)
    inp = keras.Input((12, 12, 3), batch_size=1)
    y = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    y = keras.layers.MaxPooling2D(2)(y)
    y = keras.layers.Conv2D(8, 3, activation="relu6")(y)
    y = keras.layers.GlobalAveragePooling2D()(y)
    y = keras.layers.Dense(5)(y)
    model = keras.Model(inp, y)
    rng = np.random.default_rng(7101)
    rep = rng.uniform(-1.0, 1.0, (64, 12, 12, 3)).astype(np.float32)

    def dataset():
        for sample in rep:
            yield [sample[None]]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = dataset
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    buf = conv.convert()  # float32 input and output: QUANTIZE / DEQUANTIZE at the ends
    out.mkdir(parents=True, exist_ok=True)
    (out / "float_io.int8.tflite").write_bytes(buf)
    x = rng.uniform(-1.2, 1.2, (6, 12, 12, 3)).astype(np.float32)
    np.savez(out / "float_io.npz", x=x, y_tflite_ref=_litert(buf, x), y_tflm=_tflm(buf, x))


def _litert(buf: bytes, x: np.ndarray) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

    it = Interpreter(model_content=buf, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    ys = []
    for sample in x:
        it.set_tensor(i, sample[None])
        it.invoke()
        ys.append(it.get_tensor(o)[0])
    return np.stack(ys)


def _tflm(buf: bytes, x: np.ndarray) -> np.ndarray:
    from tflite_micro.python.tflite_micro import runtime  # noqa: PLC0415

    it = runtime.Interpreter.from_bytes(buf, arena_size=8 << 20)
    ys = []
    for sample in x:
        it.set_input(sample[None], 0)
        it.invoke()
        ys.append(it.get_output(0)[0])
    return np.stack(ys)


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("tests/data/tflite_float_io"))
