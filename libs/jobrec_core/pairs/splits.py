"""Triples and splits (paper §6): which candidates are kept, their negative, their split, and
the MAP sets' documents. Pure DataFrame -> DataFrame functions, seeded by hashes."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from jobrec_core.config import PairsConfig
from jobrec_core.models.splits import REGION_ORDER, SplitRule, hash_position

SPLITS = ("train", "dev", "test", "map_dev", "map_test")


TRIPLE_SPLITS = ("train", "dev", "test")


MAP_SPLITS = ("map_dev", "map_test")


# Held-out-interest sets: the pools a model is selected on (dev) and gated on (test).
HELD_OUT_SPLITS = {"held_out_dev": ("dev", "map_dev"), "held_out_test": ("test", "map_test")}

# The training candidates' pools, which `examples: pool` models learn from (`pool_pairs`).
POOL_SPLIT = {"pool_train": ("train",)}


# What every stored row of a query carries of it.
_QUERY = ("candidate_id", "split", "query_terms", "query_job_share")


def _seeded_hash(seed: int, purpose: str, column: str) -> Column:
    return F.xxhash64(F.lit(seed), F.lit(purpose), F.col(column))


def select_triples(queries: DataFrame, retrieved: DataFrame, seed: int) -> DataFrame:
    """Candidates whose positive is in their top 100, with its BM25 score, and a negative.

    Adds `outcome`: `kept`, `positive_not_retrieved` or `no_negative` (every result of the
    less informative query is one of the candidate's own jobs); failed searches are not here.
    Null `full_hits` (not searched: the screen showed the positive outside the top k,
    `search.bm25.screened_out`) is `positive_not_retrieved` too.
    """
    joined = queries.join(retrieved.where(F.col("error").isNull()), "candidate_id")
    positive = F.filter("full_hits", lambda h: h["job_id"] == F.col("positive_job_id"))
    candidates = F.filter(
        "negative_hits", lambda h: ~F.array_contains(F.col("own_job_ids"), h["job_id"])
    )
    pick = F.pmod(_seeded_hash(seed, "negative job", "candidate_id"), F.size(candidates))
    chosen = F.element_at(candidates, (pick + 1).cast("int"))
    return joined.select(
        "candidate_id",
        "query_terms",
        "query_job_share",
        "negative_terms",
        "own_job_ids",
        "full_hits",
        "negative_hits",
        "positive_job_id",
        F.element_at(positive, 1)["score"].alias("pos_bm25"),
        chosen["job_id"].alias("neg_job_id"),
        chosen["score"].alias("neg_bm25"),
    ).withColumn(
        "outcome",
        F.when(F.col("full_hits").isNull() | (F.size(positive) == 0), "positive_not_retrieved")
        .when(F.size(candidates) == 0, "no_negative")
        .otherwise("kept"),
    )


def assign_splits(kept: DataFrame, rule: SplitRule, sizes: Mapping[str, int]) -> DataFrame:
    """Adds `split` (null: not used): each candidate's region of `rule`, for the first
    `sizes[region]` candidates of the region by hash position (the rest of a region are
    unused, never another split; the evaluations' region has no size, so none is used)."""
    region = rule.region()
    order = Window.partitionBy(region).orderBy(
        hash_position(rule.seed, "candidate_id"), "candidate_id"
    )
    cap: Column = F.lit(0)
    for name, size in sizes.items():
        cap = F.when(region == name, F.lit(size)).otherwise(cap)
    return (
        kept.withColumn("split_rank", F.row_number().over(order))
        .withColumn("split", F.when(F.col("split_rank") <= cap, region).cast("string"))
        .drop("split_rank")
    )


def split_sizes(settings: PairsConfig) -> dict[str, int]:
    """The most candidates each split takes from its region: its configured size."""
    return {name: int(getattr(settings, name)) for name in REGION_ORDER}


def map_documents(selected: DataFrame, positives: int, negatives: int) -> DataFrame:
    """Per MAP candidate, the paper's 100 documents: the top `positives` of the full query
    (label 1), then the first `negatives` results of the less informative query that are not
    among them (label 0), each with its BM25 score and rank in its own result list.

    The candidate's other own jobs (those the queries were built from) are left out of both
    lists first, as in the held-out sets: each matches its own words in the query and, for
    the profile features, is compared with itself, so keeping them labelled relevant would
    reward a model for finding what the query was made of. Ranks are counted among the
    hits kept."""
    full, negative = (_without_other_own_jobs(hits) for hits in ("full_hits", "negative_hits"))
    top = F.slice(full, 1, positives)
    top_ids = F.transform(top, lambda h: h["job_id"])
    rest = F.slice(
        F.filter(negative, lambda h: ~F.array_contains(top_ids, h["job_id"])), 1, negatives
    )
    labelled = F.concat(_labelled(top, 1), _labelled(rest, 0))
    return selected.select(*_QUERY, F.explode(labelled).alias("d")).select(*_QUERY, "d.*")


def _other_own_jobs() -> Column:
    """The candidate's own jobs but the held-out positive: those its queries were built from."""
    return F.filter("own_job_ids", lambda job: job != F.col("positive_job_id"))


def _without_other_own_jobs(hits: str) -> Column:
    """`hits` without the candidate's own jobs other than the held-out positive."""
    others = _other_own_jobs()
    return F.filter(hits, lambda h: ~F.array_contains(others, h["job_id"]))


def held_out_documents(
    assigned: DataFrame, splits: Mapping[str, tuple[str, ...]] = HELD_OUT_SPLITS
) -> DataFrame:
    """Per candidate of the `splits` sources (triples and MAP alike), the pool a
    recommendation would re-rank: the full query's hits minus the candidate's other own jobs,
    with label 1 on the held-out job (the positive, which the query was built without) and
    `bm25_rank` counted among the kept hits. Where a model puts that job is the held-out
    interest metric: it needs only the platform's own interest data, so it exists on real
    data, unlike the generator's latent interests, and it is what training learns from
    (`pool_train`, through :func:`pool_pairs`), selects epochs on (`held_out_dev`) and the
    promotion gate compares models on (`held_out_test`)."""
    split: Column = F.lit(None).cast("string")
    for name, sources in splits.items():
        split = F.when(F.col("split").isin(*sources), name).otherwise(split)
    documents = F.transform(
        _without_other_own_jobs("full_hits"),
        lambda h, i: F.struct(
            h["job_id"].alias("job_id"),
            (h["job_id"] == F.col("positive_job_id")).cast("int").alias("label"),
            h["score"].alias("bm25"),
            (i + 1).alias("bm25_rank"),
        ),
    )
    return (
        assigned.withColumn("split", split)
        .where(F.col("split").isNotNull())
        .select(*_QUERY, F.explode(documents).alias("d"))
        .select(*_QUERY, "d.*")
    )


def _labelled(hits: Column, label: int) -> Column:
    """Hits -> (job_id, label, bm25, bm25_rank) structs, ranks from 1 in the hits' order."""
    return F.transform(
        hits,
        lambda h, i: F.struct(
            h["job_id"].alias("job_id"),
            F.lit(label).alias("label"),
            h["score"].alias("bm25"),
            (i + 1).alias("bm25_rank"),
        ),
    )


def profile_owners(assigned: DataFrame) -> DataFrame:
    """`candidate_id, own_job_ids, sequence_job_ids` of the split candidates: the jobs the
    query was built from (all but the positive), and the whole interest row (the profile
    features leave it out of the interest graph, `features.profile`)."""
    return assigned.select(
        "candidate_id",
        _other_own_jobs().alias("own_job_ids"),
        F.col("own_job_ids").alias("sequence_job_ids"),
    )


def pool_sample(pools: DataFrame, negatives: int, seed: int) -> DataFrame:
    """Pool rows (`held_out_documents`) -> each candidate's held-out job and up to
    `negatives` other jobs of its pool, drawn by a seeded hash of (candidate, job): only
    these get features, not the whole pool. A pool without its held-out job makes no pair,
    so it is left out here, before any feature is computed for it."""
    # the held-out job first (draw 0), then the other jobs in the seeded order (1, 2, ...):
    # the held-out job never takes a negative's place
    draw = Window.partitionBy("candidate_id").orderBy(
        F.col("label").desc(),
        F.xxhash64(F.lit(seed), F.lit("pool negative"), "candidate_id", "job_id"),
        "job_id",
    )
    return (
        pools.withColumn("draw", F.row_number().over(draw) - 1)
        .withColumn("found", F.max("label").over(Window.partitionBy("candidate_id")))
        .where((F.col("draw") <= negatives) & (F.col("found") == 1))
        .drop("draw", "found")
    )


def more_held_out_jobs(
    candidates: DataFrame, assigned: DataFrame, lists: int, seed: int
) -> DataFrame:
    """The training candidates' further held-out jobs, one per extra training list (issue
    18: several lists per candidate instead of one triple).

    `candidates` (`candidate_id, sequence`: the cleaned interest rows) and the `train` rows of
    `assigned` (whose `positive_job_id`, the highest-scored job, is the first list's) ->
    `list_id, candidate_id, sequence, positive_job_id`: up to `lists - 1` more of each
    candidate's jobs, the highest-scored first (the platform's own measure of interest; a
    seeded hash breaks ties), each to be held out from a query of all the candidate's other
    jobs. `list_id` (a seeded hash of candidate and job, 63 bits) stands in for the candidate id
    while the list is searched and featured, so that every per-query step keeps one query per
    key."""
    train = assigned.where(F.col("split") == "train").select("candidate_id", "positive_job_id")
    rows = candidates.select("candidate_id", "sequence")
    jobs = (
        rows.join(train, "candidate_id")
        .select("candidate_id", "positive_job_id", F.explode("sequence").alias("e"))
        .where(F.col("e.job_id") != F.col("positive_job_id"))
        .groupBy("candidate_id", F.col("e.job_id").alias("job_id"))
        .agg(F.max("e.score").alias("score"))
    )
    order = Window.partitionBy("candidate_id").orderBy(
        F.col("score").desc(),
        F.xxhash64(F.lit(seed), F.lit("held-out job"), "candidate_id", "job_id"),
        "job_id",
    )
    chosen = jobs.withColumn("list", F.row_number().over(order)).where(F.col("list") < lists)
    return chosen.join(rows, "candidate_id").select(
        F.shiftrightunsigned(  # non-negative, as a candidate id (it seeds generators)
            F.xxhash64(F.lit(seed), F.lit("training list"), "candidate_id", "job_id"), 1
        ).alias("list_id"),
        "candidate_id",
        "sequence",
        F.col("job_id").alias("positive_job_id"),
    )


def pool_pairs(featured: DataFrame) -> DataFrame:
    """Featured :func:`pool_sample` rows -> training pairs in the triples' shape: the
    held-out job (the positive) against each drawn job of the same pool. Both documents come
    from the query that built the pool, so no feature tells them apart by the query (the
    paper's negatives come from a second, shorter query, and their BM25 gives them away)."""
    shared = (*_QUERY, "query_idf")
    documents = [c for c in featured.columns if c not in (*shared, "label", "bm25_rank")]
    negative = featured.where(F.col("label") == 0).select(
        "candidate_id", *[F.col(c).alias(f"neg_{c}") for c in documents]
    )
    positive = featured.where(F.col("label") == 1).select(
        *shared, *[F.col(c).alias(f"pos_{c}") for c in documents]
    )
    return positive.join(negative, "candidate_id")
