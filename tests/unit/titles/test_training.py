"""The Siamese title encoder: its input, its loss, its batches, and the saved normaliser."""

from __future__ import annotations

import io

import numpy as np
import torch

from jobrec_core.titles.sets import Anchored, ExtraWords, Labelled, TitleSets
from jobrec_core.titles.training import (
    PairSampler,
    TrainingSettings,
    contrastive_loss,
    train_encoder,
    with_extra_words,
)
from jobrec_scoring.titles import (
    EncoderSpec,
    Lookup,
    TitleEncoder,
    TitleNormaliser,
    canonical,
    char_ids,
)

SPEC = EncoderSpec(layers=1, hidden=8, char_dim=4, output_dim=6, dropout=0.0, max_chars=40)


def settings(**changes) -> TrainingSettings:
    values = dict(
        steps=30,
        batch_occupations=3,
        pairs_per_occupation=1,
        learning_rate=0.01,
        margin=0.5,
        negative_weight=4.0,
        typo_rate=0.2,
        typo_substitute=0.2,
        typo_delete=0.05,
        extra_words_rate=0.3,
        augmented_rate=0.5,
        confusable_share=0.5,
        seed=1,
        log_every=10,
    )
    return TrainingSettings(**{**values, **changes})


def small_sets() -> TitleSets:
    members = {
        "15-1252.00": ("software developer", "java programmer"),
        "29-1141.00": ("registered nurse", "staff nurse"),
        "35-2014.00": ("cook", "line cook"),
        "47-2111.00": ("electrician",),
    }
    taxonomy = tuple(Labelled(t, c) for c, ts in members.items() for t in ts)
    return TitleSets(
        taxonomy=taxonomy,
        members=members,
        augmented={"15-1252.00": (Anchored("senior java developer", "java developer"),)},
        extra_words=ExtraWords(("enterprise",), ("| housing",), ("london",), ("platform",)),
        tests={"annotations": (Labelled("senior java developer", "15-1252.00"),)},
        validation={"typos": (Labelled("registred nurse", "29-1141.00"),)},
        confusable={"15-1252.00": ("47-2111.00",), "35-2014.00": ("29-1141.00",)},
    )


def test_canonical_titles_keep_separators_and_drop_the_rest():
    assert canonical("  Sr. Data Engineer – Remote (m/f/d)!  ", 80) == (
        "sr. data engineer remote (m/f/d)"
    )
    assert canonical("C++ Developer | Team", 8) == "c++ deve"
    assert canonical(None, 10) == ""


def test_character_ids_pad_and_keep_lengths():
    ids, lengths = char_ids(["ab", "", "abc"], 10)
    assert ids.shape == (3, 3) and lengths.tolist() == [2, 1, 3]
    assert ids[0, 2] == 0 and ids[0, 0] != 0


def test_the_loss_pulls_positives_together_and_only_close_negatives_apart():
    same = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0]] * 2), dim=-1)
    labels = torch.tensor([0, 1, 0, 1])  # every pair of one label is a positive
    # positives identical (cos 1), negatives orthogonal (cos 0 < margin): no loss
    assert float(contrastive_loss(same, labels, 0.5, 4.0)) == 0.0
    close = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [1.0, 0.1]] * 2), dim=-1)
    assert float(contrastive_loss(close, labels, 0.5, 4.0)) > 0.0


def test_batches_hold_pairs_of_distinct_occupations_with_confusable_ones():
    sampler = PairSampler(small_sets(), settings(batch_occupations=4, pairs_per_occupation=2), 40)
    texts, labels = sampler.batch()
    assert len(texts) == 16 and len(set(labels.tolist())) == 4
    assert (np.bincount(labels)[np.unique(labels)] == 4).all()


def test_positive_pairs_are_made_as_seed_001_augments_its_data():
    sets = small_sets()
    sampler = PairSampler(
        sets, settings(typo_rate=0.3, extra_words_rate=0.3, augmented_rate=0.3), 40
    )
    pairs = [sampler.pair("15-1252.00") for _ in range(300)]
    titles = set(sets.members["15-1252.00"])
    assert ("senior java developer", "java developer") in pairs  # a variant and its anchor
    assert any(a in titles and b not in titles and a in b and a != b for a, b in pairs)  # extras
    assert any(a in titles and b not in titles and a not in b for a, b in pairs)  # typos
    assert any(a in titles and b in titles for a, b in pairs)


def test_extra_words_surround_the_title():
    words = small_sets().extra_words
    rng = __import__("random").Random(3)
    seen = {with_extra_words("java developer", words, rng, 80) for _ in range(200)}
    assert all("java developer" in s for s in seen)
    assert len(seen) > 5 and "java developer" in seen


def test_a_trained_normaliser_names_occupations_and_survives_saving():
    normaliser = train_encoder(small_sets(), SPEC, settings(), None)
    found = normaliser.normalise(["Registered Nurse", "", "JAVA programmer"])
    assert found.loc[0, "occupation"] == "29-1141.00"
    assert found.loc[0, "confidence"] > 0.99  # it is a taxonomy title
    assert found.loc[1, "occupation"] is None and np.isnan(found.loc[1, "confidence"])
    buffer = io.BytesIO()
    normaliser.save(buffer)
    buffer.seek(0)
    again = TitleNormaliser.load(buffer)
    assert again.normalise(["Registered Nurse", "", "JAVA programmer"]).equals(found)


def test_the_normaliser_knows_the_training_titles_after_the_taxonomy():
    normaliser = train_encoder(small_sets(), SPEC, settings(steps=5), None)
    assert normaliser.titles[-1] == "senior java developer"
    assert normaliser.taxonomy_size == len(normaliser.titles) - 1
    paper = normaliser.taxonomy_only()
    assert "senior java developer" not in paper.titles and paper.lookup == Lookup()


def test_training_is_reproducible():
    first = train_encoder(small_sets(), SPEC, settings(steps=10), None)
    second = train_encoder(small_sets(), SPEC, settings(steps=10), None)
    assert np.array_equal(first.vectors, second.vectors)
    assert isinstance(first.encoder, TitleEncoder)
