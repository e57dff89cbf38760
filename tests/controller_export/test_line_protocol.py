"""Line protocol formatting and parsing."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.export.errors import LineProtocolError
from controller.export.line_protocol import format_columns, format_line, parse_line

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)


def test_escaping_golden() -> None:
    line = format_line("int hop,x", {"sw itch": "a=b,c", "empty": ""},
                       {"q": 5, "r": 2.5, "s": 'x "y" \\', "ok": False}, 17)
    assert line == 'int\\ hop\\,x,sw\\ itch=a\\=b\\,c q=5i,r=2.5,s="x \\"y\\" \\\\",ok=false 17'


@settings(max_examples=150, deadline=None)
@given(m=_text, tags=st.dictionaries(_text, _text, max_size=3),
       ints=st.dictionaries(_text, st.integers(-2**63, 2**63 - 1), min_size=1, max_size=3),
       strs=st.dictionaries(_text, _text, max_size=2), t=st.integers(0, 2**62))
def test_round_trip(m: str, tags: dict, ints: dict, strs: dict, t: int) -> None:
    fields = {**ints, **{"s_" + k: v for k, v in strs.items()}}
    line = format_line(m, tags, fields, t)
    assert line is not None
    p = parse_line(line)
    assert p.measurement == m and p.tags == tags and p.fields == fields and p.time_ns == t


def test_nan_fields_dropped_and_empty_points_skipped() -> None:
    assert format_line("m", {}, {"a": math.nan}) is None
    lines = format_columns("m", tags={"k": [1, 2]},
                           fields={"a": np.array([np.nan, 1.0]), "b": np.array([np.nan, np.inf])},
                           time_ns=np.array([5, 6]))
    assert lines == ["m,k=2 a=1.0 6"]


def test_errors_name_the_value() -> None:
    with pytest.raises(LineProtocolError, match="object"):
        format_line("m", {}, {"a": object()})  # type: ignore[dict-item]
    with pytest.raises(LineProtocolError, match="bad field value 'abc'"):
        parse_line("m a=abc 1")
