"""The title normaliser's data: typos, induced synonyms, the trigram baseline, the sets and
their validation split."""

from __future__ import annotations

import random

import numpy as np
import pytest

from jobrec_core.taxonomy.onet import load_catalogue
from jobrec_core.taxonomy.real_ads import real_ad_titles
from jobrec_core.taxonomy.titles import split_titles
from jobrec_core.titles.sets import (
    RealAd,
    build_title_sets,
    composition_variants,
    induced_synonyms,
    with_typos,
)
from jobrec_scoring.trigrams import TrigramMatcher, trigrams


def test_typos_edit_five_percent_of_the_characters_and_at_least_one():
    rng = random.Random(0)
    for text in ["cook", "registered nurse", "software engineer in test automation"]:
        typo = with_typos(text, rng, 0.05)
        assert typo != text
        edits = max(1, round(0.05 * len(text)))
        assert len(text) - edits <= len(typo) <= len(text)


def test_synonyms_are_induced_from_titles_that_share_words():
    titles = ["java developer", "java programmer", "developer", "c++ developer", "web designer"]
    found = induced_synonyms(titles)
    # "developer" is a title by itself: no candidate may use it
    assert ("developer", "programmer") not in found
    titles = ["java developer", "java programmer", "c++ developer"]
    found = induced_synonyms(titles)
    assert ("developer", "programmer") in found
    made = composition_variants(titles, found)
    assert made.keys() >= {"c++ programmer", "java developer"}
    assert made["c++ programmer"] in {"c++ developer", "java programmer"}  # either synonym


def test_synonyms_are_short_and_share_no_word():
    titles = ["senior data engineer", "senior platform data engineer", "senior analyst"]
    for a, b in induced_synonyms(titles):
        assert len(a.split()) <= 2 and len(b.split()) <= 2
        assert not set(a.split()) & set(b.split())


def test_the_trigram_matcher_ignores_extra_words_and_can_exclude_labels():
    taxonomy = ["java developer", "registered nurse", "nurse"]
    matcher = TrigramMatcher(taxonomy)
    assert trigrams("ab") == {" ab", "ab "}
    found = matcher.nearest(["senior java developer (remote)", "registered nurse", "nurse"])
    assert found.tolist() == [0, 1, 2]
    labels = np.array(["dev", "rn", "rn", "rn"], dtype=object)  # taxonomy, then the query
    assert matcher.nearest(["registered nurse"], excluded=labels).tolist() == [0]


@pytest.fixture(scope="module")
def title_sets(config):
    catalogue = load_catalogue(config.data.reference_dir)
    titles = real_ad_titles(config.data.reference_dir)
    split = split_titles(catalogue, titles, config.titles.split_seed)
    s = config.titles
    return build_title_sets(
        split.normaliser,
        catalogue,
        [RealAd(title, "", "") for title in titles],
        seed=s.split_seed,
        max_chars=s.max_chars,
        typo_share=s.test_typo_share,
        composition_test_share=s.composition_test_share,
        extra_words_test_share=s.extra_words_test_share,
        synonym_support=s.synonym_support,
        validation_share=s.validation_share,
    )


def test_validation_titles_are_neither_tested_trained_nor_known(title_sets):
    tested = {i.text for items in title_sets.tests.values() for i in items}
    trained = {a.text for items in title_sets.augmented.values() for a in items}
    validation = {i.text for items in title_sets.validation.values() for i in items}
    assert all(title_sets.validation[name] for name in ("typos", "composition", "extra_words"))
    assert not validation & tested and not validation & trained
    assert not validation & {t.text for t in title_sets.taxonomy}
    assert not tested & trained
