"""The Python endpoint's erasure code (traffic.fec_codec): whichever implementation it
picked, its bytes are the reference's (traffic.fec), so either end of a QP may use it."""
from __future__ import annotations

import os
import random

import pytest

from traffic import fec, fec_codec
from traffic.errors import FecError


@pytest.mark.parametrize(("k", "m"), [(1, 1), (8, 1), (32, 7), (64, 16), (128, 3)])
def test_same_bytes_as_reference_and_decodes(k, m):
    data = [os.urandom(1030) for _ in range(k)]
    repairs = fec_codec.encode(data, m)
    assert repairs == fec.encode(data, m)
    rng = random.Random(k * 100 + m)
    lost = set(rng.sample(range(k), min(k, m)))
    have = {i: d for i, d in enumerate(data) if i not in lost}
    got = fec_codec.decode(k, m, have, dict(enumerate(repairs)))
    assert got == {i: data[i] for i in lost}


def test_too_few_symbols_is_a_fec_error():
    data = [os.urandom(64) for _ in range(8)]
    repairs = fec_codec.encode(data, 1)
    with pytest.raises(FecError):
        fec_codec.decode(8, 1, {i: data[i] for i in range(6)}, {0: repairs[0]})


def test_name_says_which():
    assert fec_codec.name() in ("isa-l", "numpy")
