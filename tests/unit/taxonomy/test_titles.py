"""The split of O*NET's titles between the data generator and the title normaliser."""

from __future__ import annotations

import pytest

from jobrec_core.taxonomy.onet import load_catalogue, match_key, normalise_title
from jobrec_core.taxonomy.titles import NORMALISER, side_of, split_titles

REAL_TITLES = ["Senior Software Engineer - Remote", "Line Cook", "Chief Vibes Officer"]


@pytest.fixture(scope="module")
def catalogue(config):
    return load_catalogue(config.data.reference_dir)


@pytest.fixture(scope="module")
def split(catalogue, config):
    return split_titles(catalogue, REAL_TITLES, config.titles.split_seed)


def generated(titles) -> set[str]:
    return {
        normalise_title(t)
        for t in (*titles.alternate, *titles.reported, titles.official)
        if t is not None
    }


def test_the_two_sides_share_no_title(split):
    normaliser = {normalise_title(t.text) for t in split.normaliser}
    generator = set().union(*(generated(t) for t in split.generator))
    assert normaliser and generator
    assert not normaliser & generator
    # about half each
    assert 0.4 < len(normaliser) / (len(normaliser) + len(generator)) < 0.6


def test_every_occupation_has_titles_to_generate(split, catalogue):
    assert len(split.generator) == len(catalogue)
    assert all(generated(t) for t in split.generator)


def test_titles_real_ads_match_belong_to_the_normaliser(split, catalogue):
    owners = catalogue.title_index()
    normaliser = {normalise_title(t.text): t.occupation for t in split.normaliser}
    for title in REAL_TITLES[:2]:
        key = match_key(title, owners)
        assert key is not None and normaliser[key] == owners[key]
    assert split.matched_by_real_ads == 2


def test_the_split_is_a_function_of_the_seed(catalogue, split, config):
    assert split_titles(catalogue, REAL_TITLES, config.titles.split_seed) == split
    other = split_titles(catalogue, REAL_TITLES, config.titles.split_seed + 1)
    assert other.normaliser != split.normaliser
    assert side_of("data engineer", 3) == side_of("data engineer", 3)
    assert {side_of(f"title {i}", 3) for i in range(50)} == {NORMALISER, "generator"}
