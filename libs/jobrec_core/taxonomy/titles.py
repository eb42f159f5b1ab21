"""Which O*NET titles the data generator may write, and which the title normaliser may learn
from (issue 22, `docs/TITLES.md`).

The generator writes its ads' titles from O*NET's titles, and the title normaliser learns
O*NET's titles. If both saw the same titles, the normaliser would simply recognise the
generator's titles, and its occupation would be the generator's ground truth under another
name. So every distinct title (by :func:`normalise_title`: "Sr. Data Engineer II" and "data
engineer" are one) goes to one side only:

* the titles that real ads match (`match_title`) go to the normaliser: a taxonomy is made of
  the titles the market uses, and those are the ones real inputs normalise to;
* every other title goes to a side by a seeded hash of its words, about half each;
* an occupation left with no title to generate from gets its O*NET title back on the
  generator's side (or, failing that, its first title that no real ad matched).

Each title of the normaliser's side belongs to one occupation, the one
`Catalogue.title_index` gives it (a title several occupations share goes to the one that
names it most directly), which is also how real ads are labelled.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from jobrec_core.taxonomy.onet import Catalogue, Occupation, match_key, normalise_title

NORMALISER = "normaliser"
GENERATOR = "generator"


@dataclass(frozen=True)
class TaxonomyTitle:
    """One title of the normaliser's taxonomy: as O*NET writes it, and its occupation."""

    text: str
    occupation: int


@dataclass(frozen=True)
class GeneratorTitles:
    """The titles the generator may write for one occupation, by O*NET source."""

    alternate: tuple[str, ...]
    reported: tuple[str, ...]
    official: str | None


@dataclass(frozen=True)
class TitleSplit:
    normaliser: tuple[TaxonomyTitle, ...]
    """The normaliser's taxonomy: one entry per distinct title, in key order."""
    generator: tuple[GeneratorTitles, ...]
    """Per occupation (catalogue order), the titles the generator may write."""
    matched_by_real_ads: int
    """Distinct titles that real ads match (all on the normaliser's side)."""


def side_of(key: str, seed: int) -> str:
    """The side a title goes to when nothing else decides: a stable hash of its words, the
    same in every process (Python's `hash` is salted per process)."""
    digest = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    return NORMALISER if int.from_bytes(digest, "big") < 2**63 else GENERATOR


def split_titles(catalogue: Catalogue, real_ad_titles: Iterable[str], seed: int) -> TitleSplit:
    """The two disjoint sides (see the module) of the catalogue's titles."""
    owners = catalogue.title_index()
    matched = {key for title in real_ad_titles if (key := match_key(title or "", owners))}
    sides = {key: NORMALISER if key in matched else side_of(key, seed) for key in owners}
    generator = []
    for occupation in catalogue.occupations:
        titles = _generator_titles(occupation, sides)
        if titles.official is None and not titles.alternate and not titles.reported:
            fallback = next(
                (
                    key
                    for key in map(normalise_title, _all_titles(occupation))
                    if key and key not in matched
                ),
                None,
            )
            if fallback is not None:
                sides[fallback] = GENERATOR
                titles = _generator_titles(occupation, sides)
            else:  # every title of it is a real ad's: the generator keeps the O*NET title
                titles = GeneratorTitles((), (), occupation.title)
        generator.append(titles)
    texts: dict[str, str] = {}
    for index, occupation in enumerate(catalogue.occupations):
        for title in _all_titles(occupation):
            key = normalise_title(title)
            if owners.get(key) == index and key not in texts:
                texts[key] = title
    normaliser = tuple(
        TaxonomyTitle(texts[key], owners[key])
        for key in sorted(owners)
        if sides[key] == NORMALISER and key in texts
    )
    return TitleSplit(normaliser, tuple(generator), len(matched))


def _all_titles(occupation: Occupation) -> tuple[str, ...]:
    """The occupation's titles, most direct first: O*NET's, reported, alternate."""
    return (occupation.title, *occupation.reported_titles, *occupation.alternate_titles)


def _generator_titles(occupation: Occupation, sides: dict[str, str]) -> GeneratorTitles:
    def ours(titles: Iterable[str]) -> tuple[str, ...]:
        return tuple(t for t in titles if sides.get(normalise_title(t)) == GENERATOR)

    official = occupation.title
    return GeneratorTitles(
        alternate=ours(occupation.alternate_titles),
        reported=ours(occupation.reported_titles),
        official=official if sides.get(normalise_title(official)) == GENERATOR else None,
    )
