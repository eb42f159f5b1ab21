"""Delta tables as MLflow datasets on real Spark and Delta: named by snapshot, metadata only."""

from __future__ import annotations

import json

import pytest

from jobrec_core.platform.tables import table_path, write_delta
from jobrec_core.platform.tracking import table_dataset

pytestmark = pytest.mark.integration


def test_a_table_is_named_by_its_snapshot_and_logged_with_its_schema(spark, config):
    path = table_path(config, "silver", "tracked")
    write_delta(spark.range(0, 10, numPartitions=2).selectExpr("id", "array(id) AS ids"), path)
    first, again = table_dataset(spark, config, path), table_dataset(spark, config, path)
    assert first.name == "silver/tracked@v0"
    assert first.digest == again.digest  # the same snapshot, the same dataset in every run
    assert json.loads(first.source.to_json()) == {"path": path}  # MLflow omits version 0
    assert first.schema is not None
    assert [c.name for c in first.schema.inputs] == ["id", "ids"]
    write_delta(spark.range(0, 5).selectExpr("id", "array(id) AS ids"), path)
    second = table_dataset(spark, config, path)
    assert second.name == "silver/tracked@v1"
    assert json.loads(second.source.to_json()) == {"path": path, "delta_table_version": 1}
    assert second.digest != first.digest


def test_a_table_with_a_map_column_is_logged_without_a_schema(spark, config):
    # MLflow would type the map from its values, a scan of the table: no schema instead.
    path = table_path(config, "raw", "with_map")
    write_delta(spark.range(0, 10).selectExpr("id", "map('k', id) AS relevance"), path)
    dataset = table_dataset(spark, config, path)
    assert (dataset.name, dataset.schema) == ("raw/with_map@v0", None)
