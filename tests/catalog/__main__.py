"""``python -m tests.catalog > docs/errors.md``: the catalog as a page for users."""

from __future__ import annotations

from tests.catalog import CASES, api, cli_cases, scale, targets

SECTIONS = (
    ("Model files", api.FILES),
    ("Compiling: backends and options", api.COMPILE),
    ("Calibration and ranges files", api.CALIBRATION),
    ("Running and evaluating", api.RUN),
    ("Labels", api.LABELS),
    ("Target primitives (conformance operators)", targets.PRIMITIVES),
    ("Lowering", targets.LOWERING),
    ("Conformance vector files", targets.VECTORS),
    ("Command line", cli_cases.CASES),
    ("Evaluation at scale: shards and clusters", scale.SHARDS),
    ("Quantization-aware training (quantemu.torch)", scale.QAT),
)

HEAD = """# What quantemu refuses, and what it says

quantemu never gives a silent result for bad input: each mistake below is refused with one
error (`InvalidInputError` for bad values, `UnsupportedError` for what is not emulated, both
`QuantemuError`s; on the command line, exit status 2 for usage errors found before any work and
1 for bad data files). The message names the offending value and the remedy; the key words
listed here are checked by `tests/test_bad_input_catalog.py` ({n} cases). NaN and ±Inf data
are refused on purpose: a target's input quantization would silently turn them into codes.
A malformed line of a conformance vector file is reported as *malformed*, with its reason.
"""


def render() -> str:
    """The Markdown page (generated, checked by the catalog test)."""
    parts = [HEAD.format(n=len(CASES))]
    for title, cases in SECTIONS:
        parts.append(f"\n## {title}\n\n| case | mistake | error | the message holds |\n")
        parts.append("| --- | --- | --- | --- |\n")
        for c in cases:
            error = c.error.__name__ + (f" (exit {c.exit_code})" if c.exit_code else "")
            words = ", ".join(f"`{w}`" for w in c.words).replace("|", "\\|")
            parts.append(f"| `{c.id}` | {c.what} | {error} | {words} |\n")
    return "".join(parts)


if __name__ == "__main__":
    print(render(), end="")
