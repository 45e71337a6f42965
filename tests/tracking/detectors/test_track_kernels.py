"""Shared track kernels: the meter codes of a text column and of its one-byte categorical."""

from __future__ import annotations

import pandas as pd
import pytest

from tracking import frames as fr
from tracking.detectors._errors import DetectorInputError
from tracking.detectors._track_kernels import (
    METER_FREE,
    METER_OCCUPIED,
    METER_OFF,
    METER_UNKNOWN,
    meter_codes,
)


def test_a_categorical_meter_gives_the_codes_of_its_text() -> None:
    text = pd.Series(["free", None, "off", "occupied", "free", None], dtype="str")
    expected = [METER_FREE, METER_UNKNOWN, METER_OFF, METER_OCCUPIED, METER_FREE, METER_UNKNOWN]
    assert meter_codes(text, len(text)).tolist() == expected
    for categories in (fr.METER_VALUES, ("off", "free", "occupied"), ("free", "off", "occupied")):
        cat = pd.Series(pd.Categorical(text, categories=categories))
        assert meter_codes(cat, len(cat)).tolist() == expected


def test_an_unknown_category_is_refused_as_text_would_be() -> None:
    cat = pd.Series(pd.Categorical(["free", "quebrado"]))
    with pytest.raises(DetectorInputError, match="quebrado"):
        meter_codes(cat, 2)
