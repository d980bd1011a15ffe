"""Why each target refuses ONNX LSTM and GRU (only onednn lowers them: ``onednn/rnn.py``).

A float stand-in would report numbers no deployment of the target produces, so these are errors
even where other operators may fall back to float.
"""

from __future__ import annotations

from types import MappingProxyType

_WHY = {
    "xs3": "XMOS's toolchain has no recurrent layer: xformer (xmos-ai-tools 1.4.2) lowers no "
    "LSTM or GRU to lib_nn. TFLite's converter would decompose the model's LSTM into "
    "UNIDIRECTIONAL_SEQUENCE_LSTM, which runs TFLite-Micro's reference kernel on the xcore; "
    "emulating that kernel is future work (backends/xs3/README.md)",
    "nvdla": "NVDLA has no recurrent engine and NVIDIA's compiler (nvdla/sw) has no LSTM or GRU "
    "layer; run the recurrent part on the host CPU (e.g. --backend onednn)",
    "nnie": "the NNIE mapper's recurrent (LSTM/RNN) layers are not documented in enough detail "
    "to emulate bit for bit; run the recurrent part on the host CPU (e.g. --backend onednn)",
    "tflite": "TFLite's converter decomposes LSTM into UNIDIRECTIONAL_SEQUENCE_LSTM (int8 "
    "weights, int16 cell state) and GRU into While loops; their integer kernels are not "
    "emulated yet (future work, backends/tflite/README.md)",
}


def recurrent_refusals(backend: str) -> MappingProxyType:
    """``{"LSTM": why, "GRU": why}`` for ``backend``'s :class:`RuleTable` ``refused``."""
    return MappingProxyType(dict.fromkeys(("LSTM", "GRU"), _WHY[backend]))
