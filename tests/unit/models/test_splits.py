"""The split rule's regions: pure arithmetic on the configured sizes."""

from __future__ import annotations

import itertools

import pytest

from jobrec_core.config import load_config
from jobrec_core.models.splits import SplitRule


def test_the_split_regions_share_the_space_in_proportion_to_the_sizes():
    base = SplitRule.of(load_config("base").pairs, 1)  # the paper's 27k / 3k x 4
    bounds = {name: (low, high) for name, low, high in base.bounds}
    assert bounds["evaluation"] == (0.0, 0.25)
    assert bounds["train"][1] == 1.0
    widths = {name: high - low for name, (low, high) in bounds.items()}
    assert widths["train"] == pytest.approx(0.75 * 27 / 39)
    assert widths["test"] == pytest.approx(0.75 * 3 / 39)
    assert all(a[2] == b[1] for a, b in itertools.pairwise(base.bounds))  # no gap, no overlap
    # the demo's scale: as for 9,000, so that the gate's test splits get twice the share
    demo = {
        name: high - low for name, low, high in SplitRule.of(load_config("local").pairs, 1).bounds
    }
    assert demo["test"] == pytest.approx(0.75 * 3 / 21)
    assert SplitRule.from_record(base.to_record()) == base
    assert base.fingerprint != SplitRule.of(load_config("base").pairs, 2).fingerprint
