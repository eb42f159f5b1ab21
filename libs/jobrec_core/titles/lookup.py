"""Choosing the title normaliser's lookup (`jobrec_scoring.titles.Lookup`) on the validation
sets (`titles.sets`): how much of the trigram cosine joins the encoder's cosine, whether
the nearest known titles vote for their occupation, and how many edits make a misspelling.

Seed 001 takes the nearest taxonomy title's occupation. With typos, the encoder alone can
prefer another occupation's title that differs by one letter; a share of the trigram cosine
breaks those near-ties as the spelling does. With synonym compositions, the nearest single
title is often another occupation's look-alike ("corn maker" -> "core maker"), while several
of the occupation's own known titles lie almost as close; a vote over the nearest ten lets
them outweigh it. A title a typed letter or two from a known title is, most likely, that
title misspelt, however close a look-alike's cosine: the spelling budget says how many
edits still read as one. Each candidate is scored on the three validation sets, and the one with
the best mean accuracy is kept (ties: the first, the simplest, in the settings' order). The
test sets take no part in it. Pure numpy over a trained normaliser; no Spark, no MLflow.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from jobrec_core.titles.sets import Labelled
from jobrec_scoring.titles import Lookup, TitleNormaliser, canonical


@dataclass(frozen=True)
class LookupScore:
    lookup: Lookup
    accuracy: dict[str, float]
    """Validation accuracy per set."""

    @property
    def mean(self) -> float:
        """The mean over the sets that hold items (-inf when none does)."""
        found = [a for a in self.accuracy.values() if not np.isnan(a)]
        return float(np.mean(found)) if found else float("-inf")


def lookup_candidates(
    neighbours: int,
    weights: list[float],
    temperatures: list[float],
    spellings: list[float],
) -> list[Lookup]:
    """Every combination of a trigram weight, a temperature and a spelling budget, in the
    settings' order."""
    return [
        Lookup(trigram_weight=w, neighbours=neighbours if t > 0 else 1, temperature=t, spelling=s)
        for w, t, s in itertools.product(weights, temperatures, spellings)
    ]


def accuracies(
    normaliser: TitleNormaliser, items: tuple[Labelled, ...], lookups: list[Lookup]
) -> list[float]:
    """Share of `items` whose chosen known title is of their occupation, per lookup."""
    if not items:
        return [float("nan")] * len(lookups)
    texts = [canonical(item.text, normaliser.encoder.spec.max_chars) for item in items]
    gold = np.asarray([item.occupation for item in items], dtype=object)
    return [
        float(np.mean(normaliser.occupations[best] == gold))
        for best, _ in normaliser.choose(texts, lookups)
    ]


def choose_lookup(
    normaliser: TitleNormaliser,
    validation: Mapping[str, tuple[Labelled, ...]],
    candidates: list[Lookup],
) -> tuple[Lookup, list[LookupScore]]:
    """The candidate with the best mean validation accuracy (see the module), and every
    candidate's scores."""
    by_set = {name: accuracies(normaliser, items, candidates) for name, items in validation.items()}
    scores = [
        LookupScore(lookup, {name: found[i] for name, found in by_set.items()})
        for i, lookup in enumerate(candidates)
    ]
    best = max(range(len(scores)), key=lambda i: (scores[i].mean, -i))
    return candidates[best], scores
