"""The title normaliser's data: its training groups, its augmentations and seed 001's four
test sets, built from the normaliser's side of O*NET's titles and the real ads' titles.

Pure functions of the taxonomy, the real ads and a seed; no Spark. Everything is canonical
text (`jobrec_scoring.titles.canonical`), labelled with an O*NET-SOC code.

* **Typos**: every taxonomy title with 5% of its characters (at least one) substituted or
  deleted, drawn again when that spells another taxonomy title. The clean title is in the
  taxonomy, so this checks that a typo does not move a title to another occupation.
* **Composition**: synonyms are induced inside each occupation: two of its titles that share
  their first or last one or two words make the rest of each a synonym candidate
  ("application *developer*", "application *programmer*"). A candidate is kept when both
  sides have at most two words and neither is a title by itself. Substituting it throughout
  the occupation gives new titles ("java *programmer*"); a seeded share of them is held out
  as the test; the rest train, each paired with the title it was made from.
* **Extra words**: real ad titles that strictly contain a taxonomy title, word for word, which
  the trigram matcher also picks ("enterprise account executive (remote)"). Half (seeded)
  are the test; the other half, minus any annotation, train, each paired with the title
  inside it, and the words around that title are the pool the extra-word augmentation
  draws from.
* **Annotations**: every distinct real ad title that `match_key` labels, with that
  occupation: the real inputs of the product. None of them is ever trained on.

A `validation_share` of the training variants and of the training real titles with extra
words, and fresh typos of that share of the taxonomy titles, are the **validation** sets:
neither trained on nor known to the normaliser, they choose its lookup
(`titles.lookup`), so that no test item chooses anything.

No test text is a training member, and every variant or real title that equals any O*NET
title of either side is dropped, so the generator's titles never reach the normaliser.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from jobrec_core.taxonomy.onet import Catalogue, match_key, normalise_title
from jobrec_core.taxonomy.titles import TaxonomyTitle
from jobrec_scoring.titles import canonical
from jobrec_scoring.trigrams import TrigramMatcher

TEST_SETS = ("typos", "composition", "extra_words", "annotations")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
T = TypeVar("T")
_PLAIN = re.compile(r"[a-z0-9+#]+")  # a word with no separator or bracket in it


@dataclass(frozen=True)
class RealAd:
    """What the normaliser's data reads of a real ad."""

    title: str
    location: str
    team: str


@dataclass(frozen=True)
class Labelled:
    text: str
    occupation: str


@dataclass(frozen=True)
class Anchored:
    """A training title that is not in the taxonomy, and the taxonomy title it comes from."""

    text: str
    anchor: str


@dataclass(frozen=True)
class ExtraWords:
    """Where the extra-word augmentation draws its words from."""

    before: tuple[str, ...]
    """Words found before a taxonomy title in training real titles ("enterprise")."""
    after: tuple[str, ...]
    """Words found after one ("(remote)", "| housing")."""
    locations: tuple[str, ...]
    teams: tuple[str, ...]


@dataclass(frozen=True)
class TitleSets:
    taxonomy: tuple[Labelled, ...]
    """The reference a title is normalised against: the normaliser's side of O*NET."""
    members: dict[str, tuple[str, ...]]
    """The taxonomy's titles per occupation."""
    augmented: dict[str, tuple[Anchored, ...]]
    """Per occupation, the training composition variants and real extra-word titles, each
    with the taxonomy title it was made from or contains."""
    extra_words: ExtraWords
    tests: dict[str, tuple[Labelled, ...]]
    """Seed 001's four test sets, by the names of :data:`TEST_SETS`."""
    validation: dict[str, tuple[Labelled, ...]]
    """Typos, Composition and Extra words items made as the tests are, from training data
    held back (see the module)."""
    confusable: dict[str, tuple[str, ...]]
    """Per occupation, the others whose taxonomy titles its own are closest to by trigrams,
    most often first: the hard negatives of a training batch."""


def with_typos(text: str, rng: random.Random, share: float) -> str:
    """`text` with `share` of its characters (at least one) substituted by a random letter
    or deleted, half and half."""
    if not text:
        return text
    chars = list(text)
    edits = max(1, round(share * len(chars)))
    for position in sorted(rng.sample(range(len(chars)), min(edits, len(chars))), reverse=True):
        if rng.random() < 0.5 and len(chars) > 1:
            del chars[position]
        else:
            chars[position] = rng.choice([c for c in _LETTERS if c != chars[position]])
    return "".join(chars)


def induced_synonyms(
    titles: Sequence[str], max_words: int = 2, support: int = 1
) -> list[tuple[str, str]]:
    """Synonym candidates of one occupation's titles (seed 001, §4.2): the different rests
    of two titles that share their first or last one or two words ("*java* developer",
    "*java* programmer"). A candidate is kept when each rest has at most `max_words` words
    of letters and digits, neither is a title of the group by itself, they share no word,
    and at least `support` different shared words make it ("java", "c++", "web"): one
    shared word alone is as often two different things ("*brass* inspector", "*paper*
    inspector") as two names of one."""
    whole = set(titles)
    rests: dict[tuple[str, tuple[str, ...]], set[tuple[str, ...]]] = defaultdict(set)
    for title in titles:
        words = tuple(title.split())
        for shared in (1, 2):
            if len(words) > shared:
                rests[("first", words[:shared])].add(words[shared:])
                rests[("last", words[-shared:])].add(words[:-shared])
    contexts: dict[tuple[str, str], int] = defaultdict(int)
    for group in rests.values():
        short = sorted(r for r in group if len(r) <= max_words and all(map(_PLAIN.fullmatch, r)))
        for i, left in enumerate(short):
            for right in short[i + 1 :]:
                a, b = " ".join(left), " ".join(right)
                if a not in whole and b not in whole and not set(left) & set(right):
                    contexts[(a, b)] += 1
    return sorted(pair for pair, count in contexts.items() if count >= support)


def composition_variants(
    titles: Sequence[str], synonyms: Iterable[tuple[str, str]]
) -> dict[str, str]:
    """Every title with one induced synonym substituted, both ways: variant -> the title it
    was made from (the first, in `synonyms` then `titles` order)."""
    made: dict[str, str] = {}
    for a, b in synonyms:
        for title in titles:
            padded = f" {title} "
            for old, new in ((a, b), (b, a)):
                if f" {old} " in padded:
                    made.setdefault(padded.replace(f" {old} ", f" {new} ", 1).strip(), title)
    return made


def build_title_sets(
    split_titles: Sequence[TaxonomyTitle],
    catalogue: Catalogue,
    real_ads: Sequence[RealAd],
    *,
    seed: int,
    max_chars: int,
    typo_share: float,
    composition_test_share: float,
    extra_words_test_share: float,
    synonym_support: int,
    validation_share: float,
) -> TitleSets:
    """The normaliser's taxonomy, training members and test sets (see the module)."""
    codes = [o.code for o in catalogue.occupations]
    owners = catalogue.title_index()
    taxonomy: dict[str, str] = {}
    for entry in split_titles:
        taxonomy.setdefault(canonical(entry.text, max_chars), codes[entry.occupation])
    reference = list(taxonomy)
    # Any O*NET title of either side, and every real title, is off limits for variants.
    onet_keys = set(owners)

    def unseen(text: str) -> bool:
        return normalise_title(text) not in onet_keys and text not in taxonomy

    annotations: dict[str, str] = {}
    for ad in real_ads:
        key = match_key(ad.title or "", owners)
        text = canonical(ad.title, max_chars)
        if key is not None and text:
            annotations.setdefault(text, codes[owners[key]])

    rng = random.Random(seed)

    def typo_of(text: str, rng: random.Random = rng) -> str:
        # A typo that spells another taxonomy title ("auger operator" -> "ager operator") is
        # that title, not a typo: drawn again.
        for _ in range(10):
            typo = with_typos(text, rng, typo_share)
            if typo not in taxonomy:
                break
        return typo

    typos = tuple(Labelled(typo_of(text), code) for text, code in taxonomy.items())

    by_occupation: dict[str, list[str]] = defaultdict(list)
    for text, code in taxonomy.items():
        by_occupation[code].append(text)
    variant_owner: dict[str, tuple[str, str] | None] = {}  # variant -> (code, source)
    for code in sorted(by_occupation):
        titles = by_occupation[code]
        made = composition_variants(titles, induced_synonyms(titles, support=synonym_support))
        for variant, source in sorted(made.items()):
            if unseen(variant) and variant not in annotations:
                # a text two occupations both produce says nothing: dropped
                variant_owner[variant] = (code, source) if variant not in variant_owner else None
    variants = [(t, *owner) for t, owner in sorted(variant_owner.items()) if owner is not None]
    random.Random(seed + 1).shuffle(variants)
    held_out = round(composition_test_share * len(variants))
    composition_test = tuple(Labelled(t, c) for t, c, _ in variants[:held_out])
    composition_validation, composition_train = _split(variants[held_out:], validation_share)

    real_texts = sorted({canonical(ad.title, max_chars) for ad in real_ads} - {""})
    matcher = TrigramMatcher(reference)
    extra: list[tuple[str, str, str]] = []  # real title, code, the taxonomy title inside it
    for text, best in zip(real_texts, matcher.nearest(real_texts), strict=True):
        inside = reference[best]
        if inside != text and f" {inside} " in f" {text} ":
            extra.append((text, taxonomy[inside], inside))
    random.Random(seed + 2).shuffle(extra)
    held_out = round(extra_words_test_share * len(extra))
    extra_test = tuple(Labelled(text, code) for text, code, _ in extra[:held_out])
    extra_validation, extra_train = _split(
        [(t, c, inside) for t, c, inside in extra[held_out:] if t not in annotations],
        validation_share,
    )

    tests = {
        "typos": typos,
        "composition": composition_test,
        "extra_words": extra_test,
        "annotations": tuple(Labelled(t, c) for t, c in sorted(annotations.items())),
    }
    tested = {item.text for items in tests.values() for item in items}
    validation_rng = random.Random(seed + 3)
    typo_sample = validation_rng.sample(
        list(taxonomy.items()), round(validation_share * len(taxonomy))
    )
    validation = {
        "typos": tuple(
            Labelled(typo, code)
            for typo, code in ((typo_of(text, validation_rng), code) for text, code in typo_sample)
            if typo not in tested
        ),
        "composition": tuple(Labelled(t, c) for t, c, _ in composition_validation),
        "extra_words": tuple(Labelled(t, c) for t, c, _ in extra_validation),
    }
    held_back = tested | {item.text for items in validation.values() for item in items}
    augmented: dict[str, list[Anchored]] = defaultdict(list)
    for text, code, anchor in [*composition_train, *extra_train]:
        if text not in held_back:
            augmented[code].append(Anchored(text, anchor))
    return TitleSets(
        taxonomy=tuple(Labelled(t, c) for t, c in taxonomy.items()),
        members={code: tuple(by_occupation[code]) for code in sorted(by_occupation)},
        augmented={code: tuple(items) for code, items in sorted(augmented.items())},
        extra_words=_extra_words(extra_train, real_ads, held_back, max_chars),
        tests=tests,
        validation=validation,
        confusable=confusable_occupations(matcher, reference, [taxonomy[t] for t in reference]),
    )


def _split(items: list[T], share: float) -> tuple[list[T], list[T]]:
    """The first `share` of `items` (already shuffled), and the rest."""
    cut = round(share * len(items))
    return items[:cut], items[cut:]


def confusable_occupations(
    matcher: TrigramMatcher, reference: list[str], codes: list[str], most: int = 8
) -> dict[str, tuple[str, ...]]:
    """For each occupation, the `most` other occupations that own the nearest other-occupation
    title of its titles most often (ties: by code)."""
    labels = np.asarray(codes + codes, dtype=object)
    nearest = matcher.nearest(reference, excluded=labels)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for code, other in zip(codes, nearest, strict=True):
        counts[code][codes[other]] += 1
    return {
        code: tuple(o for o, _ in sorted(found.items(), key=lambda x: (-x[1], x[0]))[:most])
        for code, found in counts.items()
    }


def _extra_words(
    extra_train: list[tuple[str, str, str]],
    real_ads: Sequence[RealAd],
    held_back: set[str],
    max_chars: int,
) -> ExtraWords:
    """The words around the taxonomy title in training real titles, and the locations and
    teams of the real ads whose title no test or validation set holds."""
    before: set[str] = set()
    after: set[str] = set()
    for text, _, inside in extra_train:
        head, tail = f" {text} ".split(f" {inside} ", 1)
        if head.strip():
            before.add(head.strip())
        if tail.strip():
            after.add(tail.strip())
    free = [ad for ad in real_ads if canonical(ad.title, max_chars) not in held_back]
    short = 30  # characters: a location or a team, not a sentence

    def values(texts: Iterable[str]) -> tuple[str, ...]:
        return tuple(
            sorted({t for t in (canonical(x, short + 1) for x in texts) if 0 < len(t) <= short})
        )

    return ExtraWords(
        before=tuple(sorted(before)),
        after=tuple(sorted(after)),
        locations=values(ad.location for ad in free),
        teams=values(ad.team for ad in free),
    )
