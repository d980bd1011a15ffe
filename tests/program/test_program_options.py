"""LoweringOptions.from_mapping: unknown keys listed, values typed by the field."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from quantemu.backends.registry import backend_specs
from quantemu.errors import InvalidInputError
from quantemu.program.options import LoweringOptions


class Isa(enum.Enum):
    AVX2 = "avx2"
    AVX512_CORE = "avx512_core"


@dataclass(frozen=True)
class Opts(LoweringOptions):
    backend: ClassVar[str] = "toy"

    isa: Isa = Isa.AVX2
    exact: bool = False
    threads: int = 1
    gain: float = 1.0
    per_layer: Mapping[str, Any] | None = None
    family: Isa | None = None


def test_defaults_and_typed_values_from_text():
    assert Opts.from_mapping() == Opts()
    opts = Opts.from_mapping({"isa": "avx512_core", "exact": "true", "threads": "4", "gain": "0.5"})
    assert opts == Opts(isa=Isa.AVX512_CORE, exact=True, threads=4, gain=0.5)


def test_members_names_and_python_values_are_accepted():
    opts = Opts.from_mapping(
        {"isa": Isa.AVX512_CORE, "exact": True, "threads": 2, "family": "AVX2"}
    )
    assert (opts.isa, opts.exact, opts.threads, opts.family) == (Isa.AVX512_CORE, True, 2, Isa.AVX2)


@pytest.mark.parametrize("text", ["0", "false", "No", "off"])
def test_false_texts(text):
    assert Opts.from_mapping({"exact": text}).exact is False


def test_mappings_pass_through_to_the_backend():
    assert Opts.from_mapping({"per_layer": {"conv1": "x"}}).per_layer == {"conv1": "x"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"isa": "sse4"}, "toy option isa = 'sse4'; choose one of 'avx2', 'avx512_core'"),
        ({"exact": "maybe"}, "toy option exact = 'maybe'; use true or false"),
        ({"threads": "two"}, "toy option threads = 'two': expected an integer"),
        ({"gain": "x"}, "toy option gain = 'x': expected a number"),
    ],
)
def test_bad_values_name_the_option_and_the_choices(options, message):
    with pytest.raises(InvalidInputError) as info:
        Opts.from_mapping(options)
    assert str(info.value) == message


def test_unknown_keys_list_every_option_with_its_type():
    with pytest.raises(InvalidInputError) as info:
        Opts.from_mapping({"bogus": 1, "isa": "avx2"})
    assert str(info.value) == (
        "toy: unknown option(s) 'bogus'; the options are isa (avx2|avx512_core), exact (bool), "
        "threads (int), gain (float), per_layer (Mapping[str, Any] | None), "
        "family (avx2|avx512_core)"
    )


def test_describe_gives_text_values():
    assert Opts(isa=Isa.AVX512_CORE).describe()["isa"] == "avx512_core"


@pytest.mark.parametrize("spec", backend_specs(), ids=lambda s: s.name)
def test_every_registered_backend_takes_its_defaults_and_rejects_unknown_options(spec):
    assert spec.parse_options({}) == spec.options()
    assert spec.parse_options(spec.options()) == spec.options()
    with pytest.raises(InvalidInputError, match=rf"^{spec.name}: unknown option\(s\) 'bogus'"):
        spec.parse_options({"bogus": "1"})
