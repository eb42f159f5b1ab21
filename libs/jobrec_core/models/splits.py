"""Which split each candidate belongs to, from its id and the seed alone (`SplitRule`): what
the pairs stage assigns by, the evaluations draw their candidates by, and the registry tells
models trained on other splits by."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig, PairsConfig
from jobrec_core.platform import manifest

# The regions of the hash space, in order: the evaluations' first, where no pair is built.
EVALUATION_REGION = "evaluation"
REGION_ORDER = ("test", "dev", "map_test", "map_dev", "train")


@dataclass(frozen=True)
class SplitRule:
    """Which split a candidate belongs to, from its id and the seed alone, never from the
    other candidates: `[low, high)` of :func:`hash_position` per region. `evaluation` (the
    ground truth's and the other evaluations' candidates) is never searched for pairs; each
    other region holds its split's candidates, up to its configured size (the first by
    position), the rest unused. So a candidate can only ever be in its own region's split or
    in none: rebuilding the pairs from more or other candidates, or with other sizes, never
    moves one a model trained on into a split it is measured on. A champion trained under
    another rule is compared with nothing (`training.promotion`)."""

    seed: int
    bounds: tuple[tuple[str, float, float], ...]

    @classmethod
    def of(cls, settings: PairsConfig, seed: int) -> SplitRule:
        """The evaluation's region is `pairs.evaluation_share` of the space; the splits
        share the rest in proportion to their configured sizes, so that with fewer
        candidates than asked for every split shrinks in proportion."""
        sizes = {name: float(getattr(settings, name)) for name in REGION_ORDER}
        total = sum(sizes.values())
        bounds = [(EVALUATION_REGION, 0.0, settings.evaluation_share)]
        low = settings.evaluation_share
        for name in REGION_ORDER:
            high = low + (1.0 - settings.evaluation_share) * sizes[name] / total
            bounds.append((name, low, high))
            low = high
        # the last region ends at 1 exactly, whatever the sum's rounding
        bounds[-1] = (bounds[-1][0], bounds[-1][1], 1.0)
        return cls(seed, tuple(bounds))

    def region(self, column: str = "candidate_id") -> Column:
        """The region of each row's candidate (a split's name, or `evaluation`)."""
        position = hash_position(self.seed, column)
        region: Column = F.lit(None).cast("string")
        for name, low, high in reversed(self.bounds):
            region = F.when((position >= low) & (position < high), name).otherwise(region)
        return region

    def evaluation(self, frame: DataFrame) -> DataFrame:
        """The rows of `frame` whose candidate lies in the evaluation's region."""
        return frame.where(self.region() == EVALUATION_REGION)

    def searchable(self, frame: DataFrame) -> DataFrame:
        """The rows of `frame` whose candidate lies in a split's region."""
        return frame.where(self.region() != EVALUATION_REGION)

    def to_record(self) -> dict[str, object]:
        """What the pairs' manifest entry keeps, so that the evaluation reads the rule the
        pairs were built with, not the current configuration's."""
        return {"seed": self.seed, "bounds": [list(b) for b in self.bounds]}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SplitRule:
        return cls(
            int(record["seed"]),
            tuple((str(n), float(low), float(high)) for n, low, high in record["bounds"]),
        )

    @property
    def fingerprint(self) -> str:
        """A short name of the rule, which training runs are tagged with."""
        material = json.dumps(self.to_record(), sort_keys=True)
        return "splits-" + hashlib.sha256(material.encode()).hexdigest()[:12]


def hash_position(seed: int, column: str) -> Column:
    """A seeded hash of `column` as a double in [0, 1): its top 53 bits over 2^53."""
    bits = F.shiftrightunsigned(F.xxhash64(F.lit(seed), F.lit("split"), F.col(column)), 11)
    return bits.cast("double") / F.lit(float(2**53))


def current_split_rule(config: JobrecConfig) -> SplitRule:
    """The rule the current pairs were built with (the manifest's `pairs` entry)."""
    pairs = manifest.current(config, "pairs")
    if "split_rule" not in pairs:
        raise RuntimeError(
            "the current pairs were built before splits were fixed by a hash of the candidate "
            "id alone: rerun jobs/build_pairs.py"
        )
    return SplitRule.from_record(pairs["split_rule"])
