"""NVIDIA NVDLA v1 integer datapaths, bit-exact to NVIDIA's C model (``conformance/nvdla.md``).

Public API: register blocks (:mod:`.registers`), the precision-control primitives
(:func:`converter`, :func:`truncate`, :func:`shifter`), the unit ops (:func:`sdp`, :func:`cdp`,
:func:`cdp_window`, :func:`pdp`, :func:`pdp_avg`, :func:`pdp_max`, :func:`pdp_min`,
:func:`cacc`, :func:`cdma_convert`) and the LUT evaluations. Programming lives in
:mod:`.quantize` (converters) and :mod:`.lut_program` (LUT tables); whole-model lowering in
:mod:`.lower`; the scalar page pseudo-code the ops are tested against in :mod:`.reference`. The
FP16 pipeline is the subpackage :mod:`.fp16` (its ops, twins, LUTs, seed 001's thresholds and
lowering); ``sdp``, ``cdp`` and ``pdp`` run it for registers that select FP16. Importing the
package registers the conformance adapters.
"""

from quantemu.backends.nvdla import conformance as _conformance  # registers the ops
from quantemu.backends.nvdla.cacc import CaccResult, cacc
from quantemu.backends.nvdla.cdma import cdma_convert
from quantemu.backends.nvdla.cdp import cdp, cdp_window, edge_fill
from quantemu.backends.nvdla.lower import calibration_free, header, lower
from quantemu.backends.nvdla.lower.options import Options
from quantemu.backends.nvdla.lut import LutOutput, cdp_lut, sdp_lut
from quantemu.backends.nvdla.pdp import pdp, pdp_avg, pdp_max, pdp_min
from quantemu.backends.nvdla.precision import converter, shifter, shr, shr_flag, truncate
from quantemu.backends.nvdla.registers import (
    AluAlgo,
    CaccRegisters,
    CdmaCvtRegisters,
    CdpRegisters,
    LeFunction,
    OperandSource,
    PdpRegisters,
    PoolingMethod,
    Precision,
    SdpRegisters,
    Table,
)
from quantemu.backends.nvdla.results import CdpResult, SdpResult
from quantemu.backends.nvdla.sdp import sdp
from quantemu.backends.registry import BackendSpec

del _conformance

#: The backend's registration (:mod:`quantemu.backends.catalog` registers it).
BACKEND = BackendSpec(
    name="nvdla",
    target="NVIDIA NVDLA v1 (nv_full cmod), INT8 or FP16 (precision=fp16)",
    scheme=(
        "nvdla/sw compiler INT8: symmetric per-tensor activations, int8 weights per kernel "
        "or per filter; FP16: fp16 weights and activations, no calibration"
    ),
    options=Options,
    lower=lower,
    header=header,
    lint=None,
    calibration_free=calibration_free,
)

__all__ = [
    "BACKEND",
    "AluAlgo",
    "CaccRegisters",
    "CaccResult",
    "CdmaCvtRegisters",
    "CdpRegisters",
    "CdpResult",
    "LeFunction",
    "LutOutput",
    "OperandSource",
    "PdpRegisters",
    "PoolingMethod",
    "Precision",
    "SdpRegisters",
    "SdpResult",
    "Table",
    "cacc",
    "cdma_convert",
    "cdp",
    "cdp_lut",
    "cdp_window",
    "converter",
    "edge_fill",
    "pdp",
    "pdp_avg",
    "pdp_max",
    "pdp_min",
    "sdp",
    "sdp_lut",
    "shifter",
    "shr",
    "shr_flag",
    "truncate",
]
