"""A live oracle of NVIDIA's NVDLA cmod floating-point primitives, for testing the NumPy port.

    python tools/nvdla_cmod_fp.py --selftest           # build, check known values, exit 0/1
    python tools/nvdla_cmod_fp.py --out-dir build/cmod  # build only; prints the library's path

From Python (``tools/`` is not a package; load this file by path, as the tests do)::

    lib = load(build())                       # or build(hw=..., out_dir=...)
    lib.fp32_add_rne_nvdla(a_u32, b_u32)      # -> uint32 array, element-wise, broadcasting

What it runs: ``cmod/hls/include/nvdla_float.h`` of https://github.com/nvdla/hw, branch
``nvdlav1``, commit ``8e06b1b9d85aab65b40d43d08eec5ea4681ff715`` (:data:`COMMIT`), with
``nvdla_int.h``, ``nvdla_common.h``, ``ac_int.h``, ``ac_fixed.h`` and ``ac_channel.h`` beside it
and ``cmod/hls/sdp/sdp.h`` for the SDP's types and widths. :func:`build` extracts exactly those
files at that commit with ``git show COMMIT:path`` from a bare mirror (``git --git-dir=HW``) or a
normal checkout (``git -C HW``) of nvdla/hw: ``HW`` is the ``hw`` argument, else the
``QUANTEMU_NVDLA_HW`` environment variable, else ``/work/.mirror/nvdla+hw/repo``. It applies one
syntax patch to ``ac_fixed.h`` (:data:`AC_FIXED_PATCH`: ``.slc<`` -> ``.template slc<`` in
``to_ac_int()``, a dependent-name token that modern g++ rejects; no arithmetic changes) and
compiles ``tools/nvdla_cmod_fp.cpp`` -- ``extern "C"`` loops that move bit patterns in and out of
the cmod's ``ac_int`` types and call the cmod functions, no arithmetic of their own -- with
``g++ -std=c++98 -O1 -fPIC -shared`` (:data:`CXXFLAGS`). C++98 because AC types 3.7 pass negative
``unsigned`` expressions as ``int`` template arguments (``iv_extend<Nr-M1-1>``), which C++11 and
later reject as narrowing.

:func:`load` wraps the library in :class:`CmodFp`, whose methods carry the names of the port
``quantemu.intmath.nvdla_float`` and take/return NumPy arrays of **bit patterns**: fp32 and fp17 as
uint32 (fp17 in the low 17 bits), fp16 as uint16. Inputs are checked (integer dtype, in range);
the cmod is called once per element of the broadcast shape.

How the wrappers pass values (as ``cmod/hls/sdp/*.cpp`` do): float words as *signed* ``ac_int``
of the format's width (``Fp32Type``, ``Fp17Type``, ``Fp16Type``), the unsigned pattern
sign-extended from its top bit; results returned as their low bits. ``Fp16ToInt16`` returns an
int16; ``Int17ToFp16`` takes ``cTrunOutType = ac_int<17,true>``. ``FpFloatToIntFrac`` is
instantiated as ``sdp_y_idx.cpp`` does, ``<8, 23, yLutRegIdxSize, yLutAddrSize, yLutFracSize>`` =
``<8, 23, 8, 9, 35>``: the right shift is ``yLutRegIdxType = ac_int<8,true>`` (-128..127), the
index ``ac_int<9,false>``, the fraction ``ac_int<35,false>``; ``FpFractionToFloat`` is
``<yLutFracSize, 6, 10> = <35, 6, 10>`` as in ``sdp_y_inp.cpp``.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

COMMIT = "8e06b1b9d85aab65b40d43d08eec5ea4681ff715"
DEFAULT_HW = Path("/work/.mirror/nvdla+hw/repo")
ENV_HW = "QUANTEMU_NVDLA_HW"
#: the HLS headers every cmod harness compiles against
HLS_HEADERS = (
    "cmod/hls/include/nvdla_float.h",
    "cmod/hls/include/nvdla_int.h",
    "cmod/hls/include/nvdla_common.h",
    "cmod/hls/include/ac_int.h",
    "cmod/hls/include/ac_fixed.h",
    "cmod/hls/include/ac_channel.h",
)
HEADERS = (*HLS_HEADERS, "cmod/hls/sdp/sdp.h")
# The one token modern compilers need in ac_fixed.h (AC types 3.7, to_ac_int()): ``slc`` is a
# member template of a dependent type, so it must be called as ``.template slc<...>``.
AC_FIXED_PATCH = (
    "((ac_fixed<AC_MAX(I,1),AC_MAX(I,1),S>) *this).slc<AC_MAX(I,1)>(0)",
    "((ac_fixed<AC_MAX(I,1),AC_MAX(I,1),S>) *this).template slc<AC_MAX(I,1)>(0)",
)
CXX = "g++"
CXXFLAGS = ("-std=c++98", "-O1", "-fPIC", "-shared", "-w")
WRAPPER_CPP = Path(__file__).resolve().with_name("nvdla_cmod_fp.cpp")
LIB_NAME = "libnvdla_cmod_fp.so"
LUT_SIZES = (8, 9, 35)  # yLutRegIdxSize, yLutAddrSize, yLutFracSize (cmod/hls/sdp/sdp.h)


class CmodUnavailable(RuntimeError):
    """The cmod cannot be built here: no g++, no git, or no nvdla/hw sources at :data:`COMMIT`."""


# --- extracting and building -------------------------------------------------------------------


def default_hw() -> Path:
    """``$QUANTEMU_NVDLA_HW`` if set, else :data:`DEFAULT_HW`."""
    env = os.environ.get(ENV_HW)
    return Path(env) if env else DEFAULT_HW


def _git(hw: Path) -> list[str]:
    """The git command prefix that reads ``hw``: a bare repository/mirror or a checkout."""
    if not hw.is_dir():
        raise CmodUnavailable(f"nvdla/hw not found at {hw}; set {ENV_HW} to a checkout or mirror")
    if shutil.which("git") is None:
        raise CmodUnavailable("git is not installed; it is needed to read nvdla/hw at " + COMMIT)
    if (hw / "HEAD").is_file() and (hw / "objects").is_dir():  # bare repository or mirror
        return ["git", f"--git-dir={hw}"]
    if (hw / ".git").exists():  # normal checkout (or worktree, where .git is a file)
        return ["git", "-C", str(hw)]
    raise CmodUnavailable(f"{hw} is neither a git checkout nor a bare git repository of nvdla/hw")


def _show(git: list[str], path: str) -> bytes:
    result = subprocess.run(
        [*git, "show", f"{COMMIT}:{path}"], capture_output=True, check=False, timeout=60
    )
    if result.returncode != 0:
        raise CmodUnavailable(
            f"cannot read {path} at {COMMIT} with {' '.join(git)}: "
            f"{result.stderr.decode(errors='replace').strip()}"
        )
    return result.stdout


def unavailable_reason(hw: Path | None = None) -> str | None:
    """Why :func:`build` cannot work here (no g++, no git, no sources at COMMIT), or None."""
    if shutil.which(CXX) is None:
        return f"{CXX} is not installed"
    try:
        git = _git(Path(hw) if hw is not None else default_hw())
        probe = subprocess.run(
            [*git, "cat-file", "-e", f"{COMMIT}:{HEADERS[0]}"],
            capture_output=True,
            check=False,
            timeout=60,
        )
    except CmodUnavailable as exc:
        return str(exc)
    if probe.returncode != 0:
        return f"nvdla/hw at {hw or default_hw()} lacks commit {COMMIT} ({HEADERS[0]})"
    return None


def patch_ac_fixed(path: str, text: str) -> str:
    """``text`` with :data:`AC_FIXED_PATCH` applied when ``path`` is ``ac_fixed.h`` (checked: the
    site must occur once), else unchanged."""
    if not path.endswith("/ac_fixed.h"):
        return text
    old, new = AC_FIXED_PATCH
    if text.count(old) != 1:
        raise CmodUnavailable(
            f"ac_fixed.h at {COMMIT}: expected the patch site once, found {text.count(old)} "
            f"times: {old!r}"
        )
    return text.replace(old, new)


def extract(hw: Path | None = None, dest: Path | None = None) -> Path:
    """Write :data:`HEADERS` at :data:`COMMIT` into ``dest`` (flat), ``ac_fixed.h`` patched."""
    git = _git(Path(hw) if hw is not None else default_hw())
    dest = Path(dest) if dest is not None else Path(tempfile.mkdtemp(prefix="nvdla_cmod_inc_"))
    dest.mkdir(parents=True, exist_ok=True)
    for path in HEADERS:
        text = patch_ac_fixed(path, _show(git, path).decode("latin-1"))
        (dest / Path(path).name).write_bytes(text.encode("latin-1"))
    return dest


def build(hw: Path | None = None, out_dir: Path | None = None) -> Path:
    """Extract the cmod headers, compile :data:`WRAPPER_CPP`; return the shared library's path.

    ``hw``: a checkout or bare mirror of nvdla/hw (default :func:`default_hw`); ``out_dir``: where
    the headers (``include/``) and ``libnvdla_cmod_fp.so`` go (default: a new temporary folder).
    Raises :class:`CmodUnavailable` when g++, git or the sources are missing, ``RuntimeError``
    when g++ fails.
    """
    if shutil.which(CXX) is None:
        raise CmodUnavailable(f"{CXX} is not installed; it is needed to compile the NVDLA cmod")
    out_dir = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="nvdla_cmod_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    include = extract(hw, out_dir / "include")
    lib = out_dir / LIB_NAME
    cmd = [CXX, *CXXFLAGS, f"-I{include}", str(WRAPPER_CPP), "-o", str(lib)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr}")
    return lib


# --- the ctypes wrapper ------------------------------------------------------------------------

_U16 = np.ctypeslib.ndpointer(np.uint16, flags="C_CONTIGUOUS")
_I16 = np.ctypeslib.ndpointer(np.int16, flags="C_CONTIGUOUS")
_U32 = np.ctypeslib.ndpointer(np.uint32, flags="C_CONTIGUOUS")
_I64 = np.ctypeslib.ndpointer(np.int64, flags="C_CONTIGUOUS")
_U64 = np.ctypeslib.ndpointer(np.uint64, flags="C_CONTIGUOUS")
_N = ctypes.c_size_t
_SIGNATURES = {  # C symbol -> argument types (inputs, outputs, n)
    "fp16_to_fp32": (_U16, _U32, _N),
    "fp32_to_fp16": (_U32, _U16, _N),
    "fp16_to_fp17": (_U16, _U32, _N),
    "fp17_to_fp32": (_U32, _U32, _N),
    "fp32_to_fp17": (_U32, _U32, _N),
    "fp16_to_int16": (_U16, _I16, _N),
    "int17_to_fp16": (_I64, _U16, _N),
    "fp32_add": (_U32, _U32, _U32, _N),
    "fp32_sub": (_U32, _U32, _U32, _N),
    "fp32_mul": (_U32, _U32, _U32, _N),
    "fp32_max": (_U32, _U32, _U32, _N),
    "fp32_min": (_U32, _U32, _U32, _N),
    "fp32_eql": (_U32, _U32, _U32, _N),
    "fp32_relu": (_U32, _U32, _N),
    "fp17_add": (_U32, _U32, _U32, _N),
    "fp17_mul": (_U32, _U32, _U32, _N),
    "fp32_to_int_frac": (_U32, _I64, _U32, _U64, _N),
    "fraction_to_fp17": (_U64, _U32, _N),
    "fp17_to_fp16": (_U32, _U16, _N),
    "fp16_max": (_U16, _U16, _U16, _N),
    "fp16_min": (_U16, _U16, _U16, _N),
    "fraction16_to_fp17": (_U64, _U32, _N),
}

# (dtype passed to C, lowest accepted value, highest accepted value) per operand kind
_FP16 = (np.uint16, 0, 0xFFFF)
_FP17 = (np.uint32, 0, 0x1FFFF)
_FP32 = (np.uint32, 0, 0xFFFFFFFF)
_INT17 = (np.int64, -(1 << 16), (1 << 16) - 1)
_RSHIFT = (np.int64, -(1 << (LUT_SIZES[0] - 1)), (1 << (LUT_SIZES[0] - 1)) - 1)
_FRAC = (np.uint64, 0, (1 << LUT_SIZES[2]) - 1)


def _operands(name: str, kinds: tuple, values: tuple) -> list[np.ndarray]:
    """Broadcast ``values``, check each is integer and in its kind's range, make C arrays."""
    arrays = [np.asarray(v) for v in values]
    for i, a in enumerate(arrays):
        if a.dtype.kind not in "iu":
            raise TypeError(f"{name}: operand {i} must be an integer array, got dtype {a.dtype}")
    arrays = np.broadcast_arrays(*arrays)
    out = []
    for i, (a, (dtype, lo, hi)) in enumerate(zip(arrays, kinds, strict=True)):
        bad = a[(a < lo) | (a > hi)]
        if bad.size:
            raise ValueError(f"{name}: operand {i} must lie in [{lo}, {hi}], got {int(bad[0])}")
        out.append(np.array(a, dtype=dtype, order="C"))  # a copy: broadcast views are strided
    return out


class CmodFp:
    """The cmod primitives on NumPy arrays of bit patterns; method names follow the port."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._lib = ctypes.CDLL(str(self.path))
        for symbol, argtypes in _SIGNATURES.items():
            fn = getattr(self._lib, symbol)
            fn.argtypes = argtypes
            fn.restype = None
        sizes = (ctypes.c_uint32 * 3)()
        self._lib.lut_sizes(sizes)
        if tuple(sizes) != LUT_SIZES:
            raise RuntimeError(f"{self.path}: yLut sizes {tuple(sizes)} != expected {LUT_SIZES}")

    def _map(self, symbol: str, kinds: tuple, out_dtype, *values) -> np.ndarray:
        ins = _operands(symbol, kinds, values)
        out = np.empty(ins[0].shape, dtype=out_dtype)
        getattr(self._lib, symbol)(*ins, out, out.size)
        return out

    # conversions
    def fp16_to_fp32_nvdla(self, h) -> np.ndarray:
        """``Fp16ToFp32``: uint16 fp16 patterns -> uint32 fp32 patterns."""
        return self._map("fp16_to_fp32", (_FP16,), np.uint32, h)

    def fp32_to_fp16_rne_sat_nvdla(self, f) -> np.ndarray:
        """``Fp32ToFp16``: uint32 fp32 patterns -> uint16 fp16 patterns."""
        return self._map("fp32_to_fp16", (_FP32,), np.uint16, f)

    def fp16_to_fp17_nvdla(self, h) -> np.ndarray:
        """``Fp16ToFp17``: uint16 fp16 patterns -> uint32 fp17 patterns (low 17 bits)."""
        return self._map("fp16_to_fp17", (_FP16,), np.uint32, h)

    def fp17_to_fp32_nvdla(self, x) -> np.ndarray:
        """``Fp17ToFp32``: fp17 patterns -> uint32 fp32 patterns."""
        return self._map("fp17_to_fp32", (_FP17,), np.uint32, x)

    def fp32_to_fp17_rne_sat_nvdla(self, f) -> np.ndarray:
        """``Fp32ToFp17``: uint32 fp32 patterns -> uint32 fp17 patterns."""
        return self._map("fp32_to_fp17", (_FP32,), np.uint32, f)

    def fp16_to_int16_round_half_away_sat_nvdla(self, h) -> np.ndarray:
        """``Fp16ToInt16``: uint16 fp16 patterns -> int16."""
        return self._map("fp16_to_int16", (_FP16,), np.int16, h)

    def int17_to_fp16_rne_sat_nvdla(self, v) -> np.ndarray:
        """``Int17ToFp16``: integers in [-2^16, 2^16-1] -> uint16 fp16 patterns."""
        return self._map("int17_to_fp16", (_INT17,), np.uint16, v)

    # fp32 arithmetic
    def fp32_add_rne_nvdla(self, a, b) -> np.ndarray:
        """``FpAdd<8,23>``."""
        return self._map("fp32_add", (_FP32, _FP32), np.uint32, a, b)

    def fp32_sub_rne_nvdla(self, a, b) -> np.ndarray:
        """``FpSub<8,23>``."""
        return self._map("fp32_sub", (_FP32, _FP32), np.uint32, a, b)

    def fp32_mul_rne_nvdla(self, a, b) -> np.ndarray:
        """``FpMul<8,23>``."""
        return self._map("fp32_mul", (_FP32, _FP32), np.uint32, a, b)

    def fp32_max_nvdla(self, a, b) -> np.ndarray:
        """``FpMax<8,23>``."""
        return self._map("fp32_max", (_FP32, _FP32), np.uint32, a, b)

    def fp32_min_nvdla(self, a, b) -> np.ndarray:
        """``FpMin<8,23>``."""
        return self._map("fp32_min", (_FP32, _FP32), np.uint32, a, b)

    def fp32_eql_nvdla(self, a, b) -> np.ndarray:
        """``FpEql<8,23>``: the returned 32-bit word (1 when the patterns are equal, else 0)."""
        return self._map("fp32_eql", (_FP32, _FP32), np.uint32, a, b)

    def fp32_relu_nvdla(self, a) -> np.ndarray:
        """``FpRelu<8,23>``."""
        return self._map("fp32_relu", (_FP32,), np.uint32, a)

    # fp17 arithmetic
    def fp17_add_rne_nvdla(self, a, b) -> np.ndarray:
        """``Fp17Add`` = ``FpAdd<6,10>``."""
        return self._map("fp17_add", (_FP17, _FP17), np.uint32, a, b)

    def fp17_mul_rne_nvdla(self, a, b) -> np.ndarray:
        """``Fp17Mul`` = ``FpMul<6,10>``."""
        return self._map("fp17_mul", (_FP17, _FP17), np.uint32, a, b)

    # SDP LUT
    def fp32_to_int_frac_nvdla(self, f, rshift) -> tuple[np.ndarray, np.ndarray]:
        """``FpFloatToIntFrac<8,23,8,9,35>``: (fp32 patterns, signed 8-bit right shifts) ->
        (index uint32, 9 bits; fraction uint64, 35 bits)."""
        fa, ra = _operands("fp32_to_int_frac", (_FP32, _RSHIFT), (f, rshift))
        o_int = np.empty(fa.shape, dtype=np.uint32)
        o_fra = np.empty(fa.shape, dtype=np.uint64)
        self._lib.fp32_to_int_frac(fa, ra, o_int, o_fra, o_int.size)
        return o_int, o_fra

    def fraction_to_fp17_nvdla(self, frac, width: int = LUT_SIZES[2]) -> np.ndarray:
        """``FpFractionToFloat<width,6,10>``: fractions (uint64) -> fp17 patterns; ``width`` 35
        (the SDP LUT, yLutFracSize) or 16 (the CDP LUT)."""
        if width == 16:
            return self._map("fraction16_to_fp17", ((np.uint64, 0, 0xFFFF),), np.uint32, frac)
        return self._map("fraction_to_fp17", (_FRAC,), np.uint32, frac)

    def fp17_to_fp16_rne_sat_nvdla(self, x) -> np.ndarray:
        """``Fp17ToFp16``: fp17 patterns -> uint16 fp16 patterns."""
        return self._map("fp17_to_fp16", (_FP17,), np.uint16, x)

    def fp16_max_nvdla(self, a, b) -> np.ndarray:
        """``FpMax<5,10>``."""
        return self._map("fp16_max", (_FP16, _FP16), np.uint16, a, b)

    def fp16_min_nvdla(self, a, b) -> np.ndarray:
        """``FpMin<5,10>``."""
        return self._map("fp16_min", (_FP16, _FP16), np.uint16, a, b)


def load(path: Path | str) -> CmodFp:
    """Load a library made by :func:`build`."""
    return CmodFp(path)


# --- self-test ---------------------------------------------------------------------------------

# (method, inputs, expected), from shared/conformance/nvdla-fp16/README.md ("Semantics observed")
# and from plain arithmetic where the README gives no number.
SELFTEST = (
    ("fp16_to_fp32_nvdla", (0x7C00,), 0x7F7FFFFF),  # +Inf -> FLT_MAX
    ("fp16_to_fp32_nvdla", (0x7E00,), 0x7F800200),  # NaN payload in the low bits, no quiet bit
    ("fp16_to_fp32_nvdla", (0x0001,), 0x33800000),  # subnormal 2^-24 -> normal fp32
    ("fp32_to_fp16_rne_sat_nvdla", (0x7FC00000,), 0x7C00),  # NaN, low 10 bits 0 -> "Inf" bits
    ("fp32_to_fp16_rne_sat_nvdla", (0x7F800000,), 0x7BFF),  # +Inf -> 65504
    ("fp32_to_fp16_rne_sat_nvdla", (0x33000000,), 0x0000),  # 2^-25: tie -> even (0)
    ("fp32_to_fp16_rne_sat_nvdla", (0x33000001,), 0x0001),  # 2^-25 + 1 ulp -> 1 subnormal ulp
    ("fp32_to_fp16_rne_sat_nvdla", (0x80000001,), 0x8000),  # fp32 subnormal -> signed zero
    ("fp16_to_int16_round_half_away_sat_nvdla", (0x3800,), 1),  # 0.5 -> 1
    ("fp16_to_int16_round_half_away_sat_nvdla", (0x4100,), 3),  # 2.5 -> 3
    ("fp16_to_int16_round_half_away_sat_nvdla", (0xB800,), -1),  # -0.5 -> -1
    ("fp16_to_int16_round_half_away_sat_nvdla", (0x7E00,), -32768),  # NaN -> -32768
    ("fp16_to_int16_round_half_away_sat_nvdla", (0x7C00,), 32767),  # +Inf -> +sat
    ("int17_to_fp16_rne_sat_nvdla", (65520,), 0x7BFF),  # would round to 65536 -> 65504
    ("int17_to_fp16_rne_sat_nvdla", (-65536,), 0xFBFF),
    ("int17_to_fp16_rne_sat_nvdla", (2049,), 0x6800),  # tie -> even: 2048
    ("fp32_add_rne_nvdla", (0x3F800000, 0x40000000), 0x40400000),  # 1 + 2 = 3
    ("fp32_add_rne_nvdla", (0x7F7FFFFF, 0x7F7FFFFF), 0x7F7FFFFF),  # overflow -> FLT_MAX
    ("fp32_sub_rne_nvdla", (0x7F800000, 0x7F800000), 0x00000000),  # Inf - Inf = 0
    ("fp32_mul_rne_nvdla", (0x00000000, 0x7F800000), 0x00000000),  # 0 * Inf = 0
    ("fp32_mul_rne_nvdla", (0xFFC00001, 0x00000000), 0xFFC00001),  # NaN x 0: first NaN as is
    ("fp32_max_nvdla", (0x80000000, 0x00000000), 0x00000000),  # -0 < +0
    ("fp32_min_nvdla", (0x80000000, 0x00000000), 0x80000000),
    ("fp32_eql_nvdla", (0x00000000, 0x80000000), 0),  # bit equality
    ("fp32_eql_nvdla", (0x7FC00001, 0x7FC00001), 1),
    ("fp32_relu_nvdla", (0xFF800000,), 0x00000000),  # -Inf -> +0
    ("fp32_relu_nvdla", (0xFFC00000,), 0xFFC00000),  # NaN passes
    ("fp16_to_fp17_nvdla", (0x3C00,), 0x7C00),  # 1.0 (bias 31)
    ("fp17_to_fp32_nvdla", (0x7800,), 0x3F000000),  # 0.5
    ("fp32_to_fp17_rne_sat_nvdla", (0x3F800000,), 0x7C00),
    ("fp17_add_rne_nvdla", (0x7C00, 0x7C00), 0x8000),  # 1 + 1 = 2
    ("fp17_mul_rne_nvdla", (0x7800, 0x8000), 0x7C00),  # 0.5 * 2 = 1
    ("fraction_to_fp17_nvdla", (1 << 34,), 0x7800),  # 0.5
    ("fp32_to_int_frac_nvdla", (0x40200000, 0), (2, 1 << 34)),  # 2.5 -> 2, .5
    ("fp32_to_int_frac_nvdla", (0x40200000, -1), (5, 0)),  # 2.5 * 2 -> 5
    ("fp32_to_int_frac_nvdla", (0x40200000, 1), (1, 1 << 33)),  # 2.5 / 2 -> 1, .25
)


def selftest(lib: CmodFp) -> bool:
    """Print and check :data:`SELFTEST`; True when every value matches."""
    ok = True
    for method, args, expected in SELFTEST:
        got = getattr(lib, method)(*args)
        got = tuple(int(g) for g in got) if isinstance(got, tuple) else int(got)
        match = got == expected
        ok &= match
        shown = ", ".join(str(a) if method.startswith("int17") else _fmt(a) for a in args)
        result = str(got) if method.startswith("fp16_to_int16") else _fmt(got)
        want = str(expected) if method.startswith("fp16_to_int16") else _fmt(expected)
        status = "ok " if match else "BAD"
        print(f"{status} {method}({shown}) = {result} (expected {want})")
    return ok


def _fmt(v) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt(x) for x in v) + ")"
    return hex(v) if v >= 0 else str(v)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hw", type=Path, help=f"nvdla/hw checkout or mirror (default ${ENV_HW})")
    parser.add_argument(
        "--out-dir",
        type=Path,
        help="where to build (default: a temporary folder, removed after --selftest)",
    )
    parser.add_argument("--selftest", action="store_true", help="check known values; exit 0/1")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nvdla_cmod_") as tmp:
        out_dir = args.out_dir
        if out_dir is None and args.selftest:
            out_dir = Path(tmp)
        try:
            lib_path = build(args.hw, out_dir)
        except (CmodUnavailable, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"built {lib_path}")
        if args.selftest:
            return 0 if selftest(load(lib_path)) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
