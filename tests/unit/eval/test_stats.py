"""The report's statistics, against values computed by hand and by reference tables."""

from __future__ import annotations

import pytest

from mp_engine.eval.stats import mcnemar_exact, percentile, wilson


def test_wilson_matches_the_reference_values():
    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    assert wilson(0, 4) == (0.0, pytest.approx(0.4899, abs=1e-4))
    assert wilson(4, 4)[1] == 1.0 and wilson(0, 0) == (0.0, 1.0)


def test_percentiles_interpolate_between_ranks():
    assert percentile([], 50) is None
    assert percentile([3.0], 95) == 3.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)


def test_mcnemar_exact_is_the_two_sided_binomial_on_the_discordant_pairs():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 4) == 0.125  # 2 * (1/2)^4
    assert mcnemar_exact(0, 6) == pytest.approx(0.03125)
    assert mcnemar_exact(1, 9) == pytest.approx(0.021484375)  # 2 * (1 + 10) / 1024
    assert mcnemar_exact(5, 5) == 1.0 and mcnemar_exact(3, 4) == mcnemar_exact(4, 3)
