"""Every registered backend passes every bundled conformance case, bit for bit.

One test per backend, parametrized over the backend registry, so that a new backend is checked as
soon as it registers. A missing suite, a backend without vectors or a dropped case is a failure,
never a skip: the bundled copy ships inside the package, so its absence is a broken checkout or
wheel. The shared suite (``../shared/conformance`` beside the checkout, where it is generated) is
run too when it is present, so a regenerated suite is checked before it is bundled.

Backend-specific checks (registered attribute sets, adapter errors) stay in
``tests/backends/<backend>/test_<backend>_conformance.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from quantemu.backends import registry
from quantemu.conformance import Status, bundled_files, collect_files, run_suite
from quantemu.conformance.suite import BUNDLED_PREFIX, bundled_root

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "conformance"

# The backends with operator-level conformance vectors. ``tflite``'s contract with the real
# runtimes is whole models (tests/backends/tflite/test_tflite_models.py): it registers no
# conformance operator.
registry.load_backends()
BACKENDS = [
    b for b in registry.known_backends() if any(e.backend == b for e in registry.registered())
]

# The cases per operator in the bundled suite (the pages' public vectors): a dropped or an added
# case changes these, so a suite regeneration is reviewed here rather than passing silently.
CASES = {
    "xs3": {
        op: 36
        for op in (
            "conv2d_1x1",
            "conv2d_deep",
            "conv2d_depthwise",
            "conv2d_shallowin",
            "fc_deepin_shallowout_16",
            "fc_deepin_shallowout_8",
            "fully_connected_16",
            "fully_connected_8",
        )
    },
    "nvdla": {"cacc": 79, "cdp": 100, "pdp_avg": 87, "pdp_max": 60, "pdp_min": 60, "sdp": 118},
    "onednn": {
        "avg_pool2d": 44,
        "conv2d": 65,
        "matmul": 54,
        "max_pool2d": 32,
        "quantized_conv2d": 51,
        "quantized_linear": 52,
        "reorder": 52,
    },
    "nnie": {"log_dequantize": 8, "log_quantize": 35},
}


def _registered_ops(backend: str) -> set[str]:
    return {entry.op for entry in registry.registered() if entry.backend == backend}


def _check_all_pass(files, backend: str) -> dict[str, int]:
    """Run ``files``; assert every case of ``backend`` passed; return the cases per operator."""
    assert files, f"no conformance vectors for {backend}"
    result = run_suite(files)
    bad = [r for r in result.results if r.status is not Status.PASSED]
    assert not bad, "\n".join(
        f"{r.id}: {r.status.value} {r.reason} {r.mismatches}" for r in bad[:5]
    )
    summaries = [s for s in result.by_op() if s.backend == backend]
    assert len(summaries) == len(result.by_op()), "vectors of another backend in its directory"
    for s in summaries:
        assert (s.failed, s.error, s.unsupported) == (0, 0, 0), s
        assert s.passed > 0, s
    return {s.op: s.passed for s in summaries}


def test_every_implemented_backend_is_covered():
    """The table above, the registry and the bundled directories name the same backends."""
    assert BACKENDS, "no backend is registered"
    assert set(CASES) == set(BACKENDS)
    shipped = {child.name for child in bundled_root().iterdir() if child.is_dir()}
    assert shipped == set(BACKENDS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bundled_vectors_pass(backend):
    """Every bundled case passes, every registered operator has cases, and none is missing."""
    prefix = f"{BUNDLED_PREFIX}{backend}/"
    files = [vf for vf in bundled_files() if vf.display.startswith(prefix)]
    counts = _check_all_pass(files, backend)
    assert set(counts) == _registered_ops(backend)
    assert counts == CASES[backend]


@pytest.mark.parametrize("backend", BACKENDS)
def test_shared_vectors_pass(backend):
    """The suite where it is generated, when it is checked out beside the repository."""
    root = SHARED / backend
    if not root.is_dir():
        pytest.skip(f"no shared suite at {root} (optional; the bundled copy is tested above)")
    counts = _check_all_pass(collect_files([root]), backend)
    assert set(counts) == _registered_ops(backend)
