"""Normalised occupations of job titles (issue 22): the column step that names every job's
occupation with the title normaliser, and the re-ranker feature it gives.

* :func:`with_title_occupations` adds `title_occupation` and `title_confidence` to any jobs
  frame with a `title`. The normaliser travels to the executors as bytes (a broadcast) and
  is loaded once per Python worker, then each Arrow batch is normalised in one call.
* :func:`occupation_agreement` is the feature: how much of the candidate's own jobs (weighed
  as in the text profile) share a pool job's normalised occupation. It reads only the
  normaliser's output, never the generator's `occupation_code`.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from pyspark import Broadcast
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_scoring.titles import TitleNormaliser

TITLE_OCCUPATION = "title_occupation"
TITLE_CONFIDENCE = "title_confidence"


@dataclass(frozen=True)
class ShippedNormaliser:
    """A normaliser as the bytes of `TitleNormaliser.save`, broadcast to the executors."""

    payload: Broadcast
    digest: str  # of the bytes: the worker's cache key

    @classmethod
    def of(cls, spark: SparkSession, normaliser: TitleNormaliser) -> ShippedNormaliser:
        buffer = io.BytesIO()
        normaliser.save(buffer)
        payload = buffer.getvalue()
        return cls(spark.sparkContext.broadcast(payload), hashlib.sha256(payload).hexdigest())

    def load(self) -> TitleNormaliser:
        """The normaliser, deserialised once per Python worker."""
        if self.digest not in _LOADED:
            torch.set_num_threads(1)  # one task per core: no oversubscription
            _LOADED[self.digest] = TitleNormaliser.load(io.BytesIO(self.payload.value))
        return _LOADED[self.digest]


_LOADED: dict[str, TitleNormaliser] = {}


def with_title_occupations(jobs: DataFrame, normaliser: ShippedNormaliser) -> DataFrame:
    """`jobs` (any columns, `title` among them) with `title_occupation` (an O*NET-SOC code,
    null for an empty title) and `title_confidence` (the cosine to the taxonomy title it
    matched)."""
    schema = ", ".join(
        [f"`{f.name}` {f.dataType.simpleString()}" for f in jobs.schema.fields]
        + [f"{TITLE_OCCUPATION} STRING", f"{TITLE_CONFIDENCE} FLOAT"]
    )

    def run(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        model = normaliser.load()
        for frame in frames:
            found = model.normalise(frame["title"].tolist())
            yield frame.assign(
                **{
                    TITLE_OCCUPATION: found["occupation"].to_numpy(),
                    TITLE_CONFIDENCE: found["confidence"].to_numpy(np.float32),
                }
            )

    return jobs.mapInPandas(run, schema)


def occupation_agreement(
    own_occupations: np.ndarray, own_weights: np.ndarray, pool_occupations: np.ndarray
) -> np.ndarray:
    """Per pool job, the weighted share of the candidate's own jobs whose normalised
    occupation is the pool job's (0 for a job without one). `own_weights` are the own jobs'
    weights in the text profile (`profile.coherence_weights`)."""
    own = np.asarray(own_occupations, dtype=object)
    weights = np.where(pd.notna(own), np.asarray(own_weights, dtype=np.float64), 0.0)
    total = float(weights.sum())
    if len(pool_occupations) == 0 or total <= 0:
        return np.zeros(len(pool_occupations), dtype=np.float32)
    # pool x own: a few own jobs per candidate, so one comparison table beats a groupby;
    # a missing own occupation weighs 0, so missing == missing adds nothing.
    same = np.asarray(pool_occupations, dtype=object)[:, None] == own[None, :]
    return (same @ weights / total).astype(np.float32)


# --- how the titles map (the data report, the titles stage) ------------------------------


@dataclass(frozen=True)
class NormalisedTitles:
    jobs: int
    generated: int
    generated_agreeing: int  # generated ads normalised to the occupation they were made from
    real_ads: int
    real_ads_labelled: int
    real_ads_agreeing: int  # labelled real ads whose normalised occupation is their label
    confidence_quartiles: tuple[float, float, float]  # of the real ads
    top_occupations: list[tuple[str, int]]  # the real ads' commonest normalised occupations


def titles_mapping(jobs: DataFrame, generated_jobs: int) -> NormalisedTitles:
    """How normalised silver jobs map. The generator's occupation of a generated ad, and the
    title-match label of a real ad, judge here, in a report; neither is ever an input. A
    generated ad's title is from the generator's side of O*NET, which the normaliser never
    saw (`taxonomy.titles`)."""
    agrees = (F.col("occupation_code") == F.col(TITLE_OCCUPATION)).cast("int")
    real = F.col("job_id") > generated_jobs
    counts = jobs.agg(
        F.count("*").alias("jobs"),
        F.sum((~real).cast("int")).alias("generated"),
        F.sum(F.when(~real, agrees)).alias("generated_agree"),
        F.sum(real.cast("int")).alias("ads"),
        F.sum(F.when(real & F.col("occupation_code").isNotNull(), 1)).alias("labelled"),
        F.sum(F.when(real, agrees)).alias("agree"),
        F.percentile_approx(F.when(real, F.col(TITLE_CONFIDENCE)), [0.25, 0.5, 0.75], 10000).alias(
            "quartiles"
        ),
    ).first()
    assert counts is not None
    top = (
        jobs.where(real & F.col(TITLE_OCCUPATION).isNotNull())
        .groupBy(TITLE_OCCUPATION)
        .count()
        .orderBy(F.desc("count"), TITLE_OCCUPATION)
        .limit(5)
        .collect()
    )
    quartiles = counts["quartiles"] or [float("nan")] * 3
    return NormalisedTitles(
        jobs=int(counts["jobs"]),
        generated=int(counts["generated"] or 0),
        generated_agreeing=int(counts["generated_agree"] or 0),
        real_ads=int(counts["ads"] or 0),
        real_ads_labelled=int(counts["labelled"] or 0),
        real_ads_agreeing=int(counts["agree"] or 0),
        confidence_quartiles=(float(quartiles[0]), float(quartiles[1]), float(quartiles[2])),
        top_occupations=[(str(r[TITLE_OCCUPATION]), int(r["count"])) for r in top],
    )


def format_mapping(mapping: NormalisedTitles, names: dict[str, str]) -> str:
    """The mapping as text; `names`: occupation titles by code."""
    q1, median, q3 = mapping.confidence_quartiles

    def share(part: int, whole: int) -> str:
        return f"{part:,} ({part / max(whole, 1):.1%})"

    return "\n".join(
        [
            f"Normalised titles: {mapping.jobs:,} jobs",
            f"  generated ads  {mapping.generated:>8,}  normalised to the occupation they were "
            f"made from: {share(mapping.generated_agreeing, mapping.generated)}",
            f"  real ads       {mapping.real_ads:>8,}  confidence quartiles "
            f"{q1:.2f} / {median:.2f} / {q3:.2f}; of the {mapping.real_ads_labelled:,} with a "
            f"title-match label, normalised to it: "
            f"{share(mapping.real_ads_agreeing, mapping.real_ads_labelled)}",
            "  real ads' commonest: "
            + ", ".join(
                f"{names.get(code, code)} {count:,}" for code, count in mapping.top_occupations
            ),
        ]
    )
