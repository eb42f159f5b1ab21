"""The title normaliser's lookup: the vote of the nearest known titles, the trigram cosine,
the spelling rule, and the choice on validation titles."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from jobrec_core.titles.lookup import choose_lookup, lookup_candidates
from jobrec_core.titles.sets import Labelled
from jobrec_scoring.titles import (
    EncoderSpec,
    Lookup,
    TitleEncoder,
    TitleNormaliser,
    edit_budget,
    misspelt,
    vote,
)
from jobrec_scoring.trigrams import TrigramMatcher

# Known titles 0-1 belong to occupation 0, 2-4 to occupation 1.
OWNERS = np.array([[0, 0, 1, 1, 1]])
SCORES = np.array([[0.90, 0.10, 0.85, 0.84, 0.83]])


def test_the_nearest_title_wins_at_temperature_zero():
    assert vote(SCORES, OWNERS, Lookup(neighbours=5, temperature=0.0)).tolist() == [0]


def test_several_close_titles_of_one_occupation_outvote_the_nearest():
    # occupation 1's three titles just below the nearest weigh more than it alone
    assert vote(SCORES, OWNERS, Lookup(neighbours=5, temperature=0.1)).tolist() == [2]
    # cold enough, the nearest is worth more than the three together
    assert vote(SCORES, OWNERS, Lookup(neighbours=5, temperature=0.01)).tolist() == [0]
    # only the two nearest vote: one title each, the nearer wins
    assert vote(SCORES, OWNERS, Lookup(neighbours=2, temperature=0.1)).tolist() == [0]


def test_the_trigram_cosine_is_one_for_the_same_title_and_zero_for_nothing_shared():
    matcher = TrigramMatcher(["cook", "registered nurse", "line cook"])
    found = matcher.pair_cosine(["cook", "zzz", ""], np.array([[0, 1], [0, 2], [1, 2]]))
    assert found.shape == (3, 2)
    assert found[0, 0] == pytest.approx(1.0) and found[0, 1] == 0.0
    assert (found[1] == 0).all() and (found[2] == 0).all()
    # "cook" has 4 trigrams with its padding, "line cook" 9; they share all 4 of the first
    assert matcher.pair_cosine(["cook"], np.array([[2]]))[0, 0] == pytest.approx(4 / 6)


def test_the_best_lookup_on_validation_is_chosen_and_ties_go_to_the_first():
    candidates = lookup_candidates(10, [0.0, 0.5], [0.0, 0.05], [0.0])
    assert candidates[0] == Lookup(0.0, 1, 0.0) and candidates[1] == Lookup(0.0, 10, 0.05)
    spec = EncoderSpec(layers=1, hidden=4, char_dim=4, output_dim=4, dropout=0.0, max_chars=40)
    normaliser = TitleNormaliser.of(
        TitleEncoder(spec), ["cook", "line cook", "registered nurse"], ["c", "c", "n"]
    )
    validation = {"typos": (Labelled("registred nurse", "n"), Labelled("lne cook", "c"))}
    chosen, scores = choose_lookup(normaliser, validation, candidates)
    best = max(score.mean for score in scores)
    assert chosen == next(s.lookup for s in scores if s.mean == best)
    # half the score from trigrams spells both typos back: a weight of 0.5 scores 1.0
    assert {s.lookup.trigram_weight for s in scores if s.mean == 1.0} >= {0.5}


def test_the_edit_budget_is_a_share_of_the_characters_and_at_least_one():
    assert edit_budget(["cook", "x" * 39, "x" * 40, ""], 0.05).tolist() == [1, 1, 2, 1]


def test_a_misspelling_keeps_only_the_titles_at_its_least_distance():
    scores = np.array([[0.9, 0.8, 0.7], [0.9, 0.8, 0.7], [0.9, 0.8, 0.7]])
    distances = np.array([[3, 1, 1], [5, 4, 9], [0, 2, 0]])
    kept = misspelt(scores, distances, np.array([1, 2, 1]))
    # row 0: two titles one edit away; row 1: none within two edits, unchanged; row 2: exact
    assert kept.tolist() == [
        [-np.inf, 0.8, 0.7],
        [0.9, 0.8, 0.7],
        [0.9, -np.inf, 0.7],
    ]
    assert vote(
        kept, np.array([[0, 1, 2]] * 3), Lookup(neighbours=3, temperature=0.05)
    ).tolist() == [
        1,
        0,
        0,
    ]


SPEC = EncoderSpec(layers=1, hidden=4, char_dim=4, output_dim=4, dropout=0.0, max_chars=40)


def test_with_the_spelling_rule_a_typo_finds_its_title_whatever_the_network_says():
    torch.manual_seed(3)
    titles = ["registered nurse", "line cook", "ager", "bagger operator", "dental hygienist"]
    normaliser = TitleNormaliser.of(TitleEncoder(SPEC), titles, ["n", "c", "a", "b", "d"])
    typos: list[str | None] = ["registred nurse", "lime cook", "bagger operatr", "dentalhygienist"]
    spelt = normaliser.with_lookup(Lookup(spelling=0.05))
    assert normaliser.occupations[spelt.nearest(typos)[0]].tolist() == ["n", "c", "b", "d"]
    # a title no known title is within its budget of is looked up as without the rule
    far: list[str | None] = ["chief executive", "cook"]
    assert spelt.nearest(far)[0].tolist() == normaliser.nearest(far)[0].tolist()
