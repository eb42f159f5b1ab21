"""The title normaliser's data: typos, induced synonyms, the trigram baseline, the sets."""

from __future__ import annotations

import random

import numpy as np

from jobrec_core.titles.ngram import TrigramMatcher, trigrams
from jobrec_core.titles.sets import (
    composition_variants,
    induced_synonyms,
    with_typos,
)


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
