"""The real job ads of `ashby-postings-2025` (`../shared/data/`): read by the generator, which
puts them among the jobs, and by the title normaliser, whose real inputs they are."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

REAL_ADS_FILE = "ashby-postings-2025/postings.jsonl.gz"
REAL_ADS_SCHEMA = (
    "id STRING, title STRING, department STRING, team STRING, location STRING, "
    "descriptionPlain STRING, publishedAt STRING"
)


def read_real_ads(
    spark: SparkSession, reference_dir: str, limit: int | None = None, first_job_id: int = 1
) -> DataFrame:
    """The first `limit` real ads by their id (all without a limit), numbered `job_id` from
    `first_job_id`."""
    path = f"{reference_dir.rstrip('/')}/{REAL_ADS_FILE}"
    if "://" not in path and not Path(path).is_file():
        raise FileNotFoundError(f"real job ads not found: {path} (set data.reference_dir)")
    ads = spark.read.schema(REAL_ADS_SCHEMA).json(path).orderBy("id")
    if limit is not None:
        ads = ads.limit(limit)
    return ads.withColumn(
        "job_id", (F.row_number().over(Window.orderBy("id")) + first_job_id - 1).cast("int")
    )


def real_ad_titles(reference_dir: str) -> list[str]:
    """Every real ad's title (empty where it has none), read without Spark: what
    `taxonomy.titles.split_titles` needs outside a job (the benchmarks)."""
    path = Path(reference_dir) / REAL_ADS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"real job ads not found: {path} (set data.reference_dir)")
    return pd.read_json(path, lines=True)["title"].fillna("").astype(str).tolist()
