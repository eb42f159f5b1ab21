"""Delta table helpers on real Spark and Delta."""

from __future__ import annotations

import pytest

from jobrec_core.platform.tables import content_fingerprint, read_delta, table_path, write_delta

pytestmark = pytest.mark.integration


def test_a_rewrite_of_the_same_rows_keeps_the_content_fingerprint(spark, config):
    """Embeddings are named after their corpus' fingerprint: a rerun that writes the same
    rows again (a new Delta version, other partitions, another order) keeps the name; any
    changed, added or repeated row changes it."""
    path = table_path(config, "silver", "fingerprinted")
    rows = spark.range(0, 50, numPartitions=3).selectExpr(
        "CAST(id AS INT) AS job_id", "array(id) AS tokens"
    )
    write_delta(rows, path)
    first = content_fingerprint(read_delta(spark, path))
    write_delta(rows.orderBy(rows.job_id.desc()).repartition(2), path)
    assert content_fingerprint(read_delta(spark, path)) == first
    changed = rows.selectExpr("job_id", "IF(job_id = 7, array(8L), tokens) AS tokens")
    repeated = rows.unionByName(rows.where("job_id = 3"))
    others = {content_fingerprint(frame) for frame in (changed, repeated, rows.limit(49))}
    assert first not in others and len(others) == 3
    assert content_fingerprint(rows.limit(0)) == "0-0"
