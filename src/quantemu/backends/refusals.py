"""Why a target's toolchain refuses an operator outright: the ``refused`` entries of the
backends' rule tables.

A float stand-in would report numbers no deployment of the target produces, so these are errors
even where other operators may fall back to float: ONNX LSTM and GRU everywhere but onednn
(``onednn/rnn.py`` lowers them), and the layers a vendor's parser has no entry for
(:func:`missing_layers`).
"""

from __future__ import annotations

from collections.abc import Mapping
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


#: What a refusal of the IR's BorderPad (ONNX Pad in mode reflect or edge) says first.
BORDER_PAD = "ONNX Pad with mode 'reflect' or 'edge' copies border values; "


def missing_layers(
    backend: str, template: str, layers: Mapping[str, tuple[str, str]]
) -> MappingProxyType:
    """``backend``'s refusals: its recurrent ones, and for each ``op -> (layer, remedy)`` of
    ``layers`` the toolchain's ``template`` (``{layer}``: the layer its parser lacks,
    ``{remedy}``: what to do); a BorderPad refusal starts with :data:`BORDER_PAD`."""
    found = dict(recurrent_refusals(backend))
    for op, (layer, remedy) in layers.items():
        why = template.format(layer=layer, remedy=remedy)
        found[op] = BORDER_PAD + why if op == "BorderPad" else why
    return MappingProxyType(found)
