"""benchmarks/contention.py's bookkeeping: the orders it runs the settings in and how it reads the runs."""
import importlib.util
from itertools import permutations
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "contention", Path(__file__).resolve().parents[2] / "benchmarks" / "contention.py")
contention = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(contention)


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_balanced_orders_let_each_setting_follow_every_other_equally_often(n):
    orders = contention.balanced_orders(n)
    assert all(sorted(o) == list(range(n)) for o in orders)
    follows = {(a, b): 0 for a, b in permutations(range(n), 2)}
    for o in orders:
        for a, b in zip(o, o[1:]):
            follows[(a, b)] += 1
    assert len(set(follows.values())) == 1, follows


def _alone(tiny, one, spin):
    return {"tinyserve": {"threads": 2, "w": tiny}, "1 thread": {"threads": 1, "w": one},
            "all spinning": {"threads": 2, "w": spin}}


def test_table_compares_with_the_better_setting_by_median_and_round_by_round():
    rows = {r["config"]: r for r in contention.table(_alone([1.0, 3.0, 2.2], [4.0, 4.0, 4.0], [2.0, 2.0, 1.0]), {},
                                                     ["w"])}
    assert rows["tinyserve"]["vs_best"] == pytest.approx(2.2 / 2.0)  # medians 2.2 and 2.0 (all spinning's)
    assert rows["tinyserve"]["paired_vs_best"] == pytest.approx(1.5)  # rounds: 0.5, 1.5, 2.2
    assert rows["1 thread"]["vs_best"] == pytest.approx(2.0)
    assert rows["all spinning"]["vs_best_95"] == (1.0, 1.0)


def test_bootstrap_interval_holds_the_ratio_and_widens_with_the_spread():
    steady, noisy = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0], [0.7, 1.3, 0.9, 1.1, 1.0, 0.8, 1.2]
    ref = [1.0] * 7
    lo, hi = contention.bootstrap_ratio(steady, ref)
    nlo, nhi = contention.bootstrap_ratio(noisy, ref)
    assert lo <= 1.0 <= hi and nlo <= 1.0 <= nhi
    assert hi - lo < 0.05 < nhi - nlo
    assert contention.bootstrap_ratio([2.0] * 5, ref) == (2.0, 2.0)
