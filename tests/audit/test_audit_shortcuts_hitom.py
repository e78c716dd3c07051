"""The shortcut table reproduces MISSION.md's measured Hi-ToM 600 figures (CoT-prompt labels)."""

from __future__ import annotations

import pytest

from tomrl.audit.heuristics import shortcut_table
from tomrl.loaders.registry import load

# MISSION.md: first stated location right on 15.8 / 30.8 / 34.2 / 43.3 / 43.3 % of orders 0-4 (n = 120 each);
# true location right on 100 / 55 / 29 / 33 / 30 % (whole percents, so within half a point).
FIRST_LOCATION = [15.8, 30.8, 34.2, 43.3, 43.3]
TRUE_LOCATION = [100, 55, 29, 33, 30]


@pytest.mark.parametrize("name", ["tomrl-paper-hitom600", "hitom"])
def test_first_and_true_location_per_order(shared_data, name):
    examples = load(name, oracle=False) if name == "hitom" else load(name)
    rows = {r.order: r for r in shortcut_table(examples)}
    assert sorted(rows) == [0, 1, 2, 3, 4]
    for order in range(5):
        row = rows[order]
        assert row.n == 120 and row.skipped == 0
        first = row.accuracies["first_location"]
        assert round(100 * first.value, 1) == FIRST_LOCATION[order]
        assert first.low < first.value < first.high or first.value in (0.0, 1.0)
        assert abs(100 * row.accuracies["true_location"].value - TRUE_LOCATION[order]) <= 0.5
    # the inverted difficulty curve the shortcut alone produces
    assert rows[4].accuracies["first_location"].value > rows[0].accuracies["first_location"].value
