"""The nvdla conformance operators declare exactly the register fields as attributes.

That every public vector passes is checked for every backend in
``tests/conformance/test_conformance_backends.py``.
"""

from __future__ import annotations

from quantemu.backends.nvdla import SdpRegisters
from quantemu.backends.registry import lookup
from quantemu.conformance import bundled_files, run_suite


def test_registered_attributes_are_exactly_the_register_fields():
    assert lookup("nvdla", "sdp").attrs == frozenset(SdpRegisters.widths())
    assert len(lookup("nvdla", "sdp").attrs) == 68  # the INT page's 67 and NAN_TO_ZERO (FP16)
    assert lookup("nvdla", "cacc").attrs == {"PROC_PRECISION", "CLIP_TRUNCATE"}


def test_the_bundled_fp16_sdp_vectors_all_pass():
    """NVIDIA's cmod FP16 SDP vectors (shared/conformance/nvdla-fp16), as bundled."""
    files = [vf for vf in bundled_files() if "nvdla-fp16/sdp_fp16" in vf.display]
    assert files
    totals = run_suite(files).totals()
    assert totals.total == 150 and totals.passed == 150


def test_every_bundled_fp16_vector_passes():
    """The whole nvdla-fp16 folder: the shared SDP vectors and the project's cmod-generated
    PDP, CDP and convolution ones."""
    files = [vf for vf in bundled_files() if "nvdla-fp16/" in vf.display]
    names = {vf.display.rsplit("/", 1)[1] for vf in files}
    assert {"sdp_fp16.jsonl.gz", "pdp_avg.jsonl.gz", "cdp.jsonl.gz", "conv_fp16.jsonl.gz"} <= names
    totals = run_suite(files).totals()
    assert totals.total > 400 and totals.passed == totals.total
