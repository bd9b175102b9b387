"""Wilson's interval: by hand, a tabled value, its edges."""

from __future__ import annotations

import math

import pytest

from skilltune.stats.proportion import wilson


def test_wilson_by_hand() -> None:
    # 8 of 10, z = 1.959964: centre (0.8 + z^2/20) / (1 + z^2/10), half as in Wilson (1927)
    z = 1.959963984540054
    n, p = 10, 0.8
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    low, high = wilson(8, 10) or (0.0, 0.0)
    assert low == pytest.approx(centre - half) and high == pytest.approx(centre + half)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)  # the tabled 95% interval of 8/10


def test_wilson_edges() -> None:
    assert wilson(0, 0) is None
    low, high = wilson(0, 5) or (1.0, 1.0)
    assert low == 0.0 and 0.0 < high < 0.5
    low, high = wilson(5, 5) or (0.0, 0.0)
    assert high == 1.0 and 0.5 < low < 1.0
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_wilson_narrows_with_more_trials() -> None:
    small = wilson(5, 10) or (0.0, 1.0)
    large = wilson(50, 100) or (0.0, 1.0)
    assert small[0] < large[0] < 0.5 < large[1] < small[1]
