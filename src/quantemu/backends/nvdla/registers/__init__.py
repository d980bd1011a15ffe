"""Register blocks of the NVDLA units (SDP, CDP, PDP, CACC, CDMA converter) and their decodings.

Each block is a frozen dataclass of raw fields named as in the NVDLA register manual
(``spec/manual/NVDLA_*.rdl``), validated on construction (see :mod:`.fields`). Its ``decode``
methods return the typed views of :mod:`.types`: sign-extended operands, fields read with a width
different from the register's (``conformance/nvdla.md`` §1.1), enums for the variants. Defaults
give a unit that passes data through unchanged (every stage bypassed, scales 1); they are
quantemu's convenience, not the hardware's reset values.
"""

from quantemu.backends.nvdla.registers.cacc import CaccRegisters, CdmaCvtRegisters
from quantemu.backends.nvdla.registers.cdp import CdpRegisters, cdp_index_select
from quantemu.backends.nvdla.registers.fields import RegisterBlock, field, sx
from quantemu.backends.nvdla.registers.pdp import PdpRegisters
from quantemu.backends.nvdla.registers.sdp import SdpRegisters
from quantemu.backends.nvdla.registers.types import (
    AluAlgo,
    Converter,
    EwConverter,
    LeFunction,
    LutConfig,
    OperandSource,
    PdpGeometry,
    PoolingMethod,
    Precision,
    Slope,
    Table,
    XUnit,
    YUnit,
)

__all__ = [
    "AluAlgo",
    "CaccRegisters",
    "CdmaCvtRegisters",
    "CdpRegisters",
    "Converter",
    "EwConverter",
    "LeFunction",
    "LutConfig",
    "OperandSource",
    "PdpGeometry",
    "PdpRegisters",
    "PoolingMethod",
    "Precision",
    "RegisterBlock",
    "SdpRegisters",
    "Slope",
    "Table",
    "XUnit",
    "YUnit",
    "cdp_index_select",
    "field",
    "sx",
]
