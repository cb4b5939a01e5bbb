"""`report/records.py: json_text`, which writes every JSON document gpuplace prints: orjson's
speed with the standard library's text (indent 2, ASCII only), and no NaN or Infinity."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gpuplace.report.records import Finite, FiniteDict, json_text, json_value, json_values

# Floats whose shortest text is the same in both writers (orjson writes 1e-05 as 0.00001).
_FLOATS = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: json.dumps(f) == repr(f) and not (0 < abs(f) < 1e-4)
)
_SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | _FLOATS | st.text()
_DOCS = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(_DOCS)
def test_the_text_is_the_standard_librarys_indented_ascii_json(doc: Any) -> None:
    assert json_text(doc) == json.dumps(doc, indent=2)


@given(st.lists(st.floats(), max_size=8))
def test_non_finite_floats_are_strings_and_every_float_reads_back(values: list[float]) -> None:
    back = json.loads(json_text({"v": values}), parse_constant=_refuse)["v"]
    for got, want in zip(back, values, strict=True):
        if math.isfinite(want):
            assert got == want
        else:
            assert got == ("nan" if math.isnan(want) else "inf" if want > 0 else "-inf")


def _refuse(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


def test_what_orjson_refuses_the_standard_library_writes() -> None:
    doc = {"big": 2**70, "surrogate": "a\udc80", "name": "é😀", "t": (1, 2)}
    assert json_text(doc) == json.dumps({**doc, "t": [1, 2]}, indent=2)


def test_values_are_finite_lists_with_non_finite_numbers_as_strings() -> None:
    value = json_value(np.array([[1.5, np.nan], [np.inf, -np.inf]], dtype=np.float32))
    assert isinstance(value, Finite)
    assert json.loads(json_text({"value": value})) == {"value": [[1.5, "nan"], ["inf", "-inf"]]}
    assert json_value(np.float64(2.5)) == 2.5
    assert json_text({"x": json_value(np.array(np.nan))}) == '{\n  "x": "nan"\n}'


def test_an_array_left_in_a_document_is_written_as_json_value_writes_it() -> None:
    doc = {"a": np.array([1.0, np.nan, -np.inf]), "b": np.float32(0.5), "c": np.float64(np.inf)}
    assert json.loads(json_text(doc)) == {"a": [1.0, "nan", "-inf"], "b": 0.5, "c": "inf"}


_ARRAYS = hnp.arrays(
    st.sampled_from(["float32", "float64", "float16", "int32", "int64", "bool"]),  # DTYPES
    st.sampled_from([(), (0,), (2,), (2, 2)]),
)


@given(st.lists(_ARRAYS | st.just(np.float64(2.5)), max_size=8))
def test_values_converted_together_are_each_one_converted_alone(values: list[Any]) -> None:
    together = json_values(values)
    alone = [json_value(v) for v in values]
    assert [type(v) for v in together] == [type(v) for v in alone]
    assert repr(together) == repr(alone)  # nan is "nan" in both: equal reprs, equal values


def test_a_finite_dict_is_written_as_it_is() -> None:
    doc = FiniteDict({"r": {"value": Finite([1.5])}})
    assert json_text(doc) == json.dumps(doc, indent=2)
    assert json_text({"v": [float("nan")]}) == '{\n  "v": [\n    "nan"\n  ]\n}'
