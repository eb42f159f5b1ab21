"""The Spark session every job runs in.

Locally (`spark.master` set) the session is built here: Delta enabled, the Delta and ES-Hadoop
jars from `spark.jars_dir` on the classpath (fetched by Maven at setup, since Spark's own Ivy
resolver cannot be relied on to reach Maven Central), and Python workers on this interpreter.
On Databricks (`spark.master: null`) the runtime's active session is reused untouched: the
cluster's libraries and settings are the runtime's business, not the job's. The bundle's
clusters redact the connector's credentials as the local session does; a session that would
show them is warned about.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig
from jobrec_core.platform.heap import freeze_long_lived
from jobrec_scoring.numerics import pin_cpu_code_paths

log = logging.getLogger(__name__)

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# Spark redacts matching keys in the UI, event logs and plan strings. The default pattern misses
# the connector's `es.net.http.auth.pass` and its API key header (`...header.Authorization`).
# deploy/databricks.yml sets the same on every cluster (tests/unit/platform checks).
REDACTION_REGEX = r"(?i)secret|password|token|access[.]key|auth[.]pass|api[._-]?key|authorization"
REDACTION_KEY = "spark.redaction.regex"
# The connector's options that carry credentials (`search.connection.connector_options`).
CONNECTOR_CREDENTIAL_KEYS = ("es.net.http.auth.pass", "es.net.http.header.Authorization")


class SparkSetupError(RuntimeError):
    """The session cannot be built as configured (missing jars, no active session)."""


class _NoPy4jCommandTraces(logging.Filter):
    """py4j logs every command it sends at DEBUG, option values included: the connector's
    credentials would reach any log collecting DEBUG. Only its INFO and above pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.INFO


def silence_py4j_command_traces() -> None:
    for name in ("py4j.clientserver", "py4j.java_gateway"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _NoPy4jCommandTraces) for f in logger.filters):
            logger.addFilter(_NoPy4jCommandTraces())


def get_spark(config: JobrecConfig) -> SparkSession:
    """The session for this environment: built locally, reused on a cluster."""
    silence_py4j_command_traces()
    if config.spark.master is None:
        # A cluster job started before any session exists (spark-submit on a cluster): let
        # the launcher's configuration decide everything.
        session = (
            SparkSession.getActiveSession()
            or SparkSession.builder.appName(config.spark.app_name).getOrCreate()
        )
        warn_unless_credentials_redacted(session)
        return session
    return _local_session(config)


def warn_unless_credentials_redacted(session: SparkSession) -> None:
    """Warn when a session this code did not build would show the connector's credentials in
    its UI, event logs and plans. Not an error: the cluster's settings are its owner's, who may
    keep credentials out of these jobs' sessions some other way."""
    regex = session.conf.get(REDACTION_KEY, None)
    if not redacts_connector_credentials(regex):
        log.warning(
            "%s of this session (%s) does not match the Elasticsearch connector's credential "
            "options (%s): they would show in the Spark UI, event logs and plans. Set it to %r "
            "in the cluster's Spark config, as deploy/databricks.yml does.",
            REDACTION_KEY,
            "Spark's default" if regex is None else repr(regex),
            ", ".join(CONNECTOR_CREDENTIAL_KEYS),
            REDACTION_REGEX,
        )


def redacts_connector_credentials(regex: str | None) -> bool:
    """Whether `spark.redaction.regex` set to `regex` (None: unset, Spark's default) hides
    every credential option of the connector. Spark searches each key with the (Java) regex;
    one Python cannot compile counts as not hiding them, since that cannot be told here."""
    if regex is None:
        return False  # Spark's default matches neither key
    try:
        pattern = re.compile(regex)
    except re.error:
        return False
    return all(pattern.search(key) for key in CONNECTOR_CREDENTIAL_KEYS)


def spark_jars(jars_dir: str | None) -> list[str]:
    """The jar files to put on Spark's classpath, or an error naming the setup step."""
    if jars_dir is None:
        return []
    folder = Path(jars_dir)
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not jars:
        raise SparkSetupError(
            f"no jars in {folder}: run scripts/setup.sh to fetch Delta and the ES-Hadoop "
            "connector from Maven Central"
        )
    return jars


def _local_session(config: JobrecConfig) -> SparkSession:
    # Workers must run this interpreter: the system Python lacks the project's packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = config.spark.master
    assert master is not None
    builder = (
        SparkSession.builder.master(master)
        .appName(config.spark.app_name)
        .config("spark.sql.extensions", DELTA_EXTENSION)
        .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        .config("spark.sql.shuffle.partitions", str(config.spark.shuffle_partitions))
        .config(REDACTION_KEY, REDACTION_REGEX)
        .config("spark.sql.warehouse.dir", config.path("warehouse"))
        .config(DRIVER_JAVA_OPTIONS, _driver_java_options(config))
    )
    jars = spark_jars(config.spark.jars_dir)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in config.spark.conf.items():
        if key != DRIVER_JAVA_OPTIONS:  # in _driver_java_options
            builder = builder.config(key, value)
    # Python workers start from the JVM's environment, which `spark-submit` set before the
    # driver pinned its own: theirs too, before their numpy loads OpenBLAS.
    for name, value in pin_cpu_code_paths().items():
        key = f"spark.executorEnv.{name}"
        if key not in config.spark.conf:
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    # spark-submit's default is INFO, the shell's WARN: one level, whichever started it.
    session.sparkContext.setLogLevel("WARN")
    return session


def _driver_java_options(config: JobrecConfig) -> str:
    """The configured driver JVM options (`spark.conf`), with Derby's folder under the storage
    root (the metastore Spark creates on first use, instead of the working directory)."""
    configured = config.spark.conf.get(DRIVER_JAVA_OPTIONS, "")
    return f"{configured} -Dderby.system.home={config.path('derby')}".strip()


def install_spark_defaults(config: JobrecConfig) -> Path:
    """Write `spark-defaults.conf` into the Spark installation of this environment.

    `spark-submit jobs/<stage>.py` starts the driver JVM before the job's code runs, so jars
    set in the session builder come too late for the driver's classpath (Delta's catalog
    class is then not found). Spark reads `$SPARK_HOME/conf/spark-defaults.conf` when it
    launches, and the pip-installed pyspark is this environment's `SPARK_HOME`. Setup calls
    this for the local environment; on a cluster the runtime's libraries play this part.
    """
    from pyspark.find_spark_home import _find_spark_home

    settings = {"spark.jars": ",".join(spark_jars(config.spark.jars_dir))}
    for key in (
        "spark.driver.memory",
        "spark.driver.host",
        "spark.driver.bindAddress",
        DRIVER_JAVA_OPTIONS,
    ):
        if key in config.spark.conf:
            settings[key] = config.spark.conf[key]
    if config.spark.master is not None:
        settings["spark.master"] = config.spark.master
    folder = Path(_find_spark_home()) / "conf"
    folder.mkdir(exist_ok=True)
    path = folder / "spark-defaults.conf"
    lines = [
        "# Written by scripts/setup.sh from conf/ "
        "(jobrec_core.platform.spark.install_spark_defaults)."
    ]
    lines += [f"{key} {value}" for key, value in settings.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@contextmanager
def spark_setting(spark: SparkSession, key: str, value: str, default: str) -> Iterator[None]:
    """The session's `key` set to `value` inside the block, then back to what it was
    (`default` when unset)."""
    previous = str(spark.conf.get(key, default))
    spark.conf.set(key, value)
    try:
        yield
    finally:
        spark.conf.set(key, previous)


def arrow_batch(spark: SparkSession, rows: int) -> AbstractContextManager[None]:
    """At most `rows` rows per Arrow batch of the pandas UDFs run inside the block (a row of
    grouped documents can hold 100 documents: small batches keep the workers' memory flat)."""
    return spark_setting(spark, "spark.sql.execution.arrow.maxRecordsPerBatch", str(rows), "10000")


def arrow_to_pandas(frame: DataFrame) -> pd.DataFrame:
    """`frame` collected to the driver through Arrow: the demo's 30,000 job texts (arrays of
    tokens) in 3.4 s against 7.5 s row by row. Array cells arrive as numpy arrays, as in
    `mapInPandas`."""
    enabled = "spark.sql.execution.arrow.pyspark.enabled"
    with spark_setting(frame.sparkSession, enabled, "true", "false"):
        return pd.DataFrame(frame.toPandas())


_GROUP_ROWS = "_group_rows"


def map_groups_in_pandas(
    frame: DataFrame,
    keys: list[str],
    function: Callable[[pd.DataFrame], pd.DataFrame],
    schema: str,
    order: Sequence[str],
) -> DataFrame:
    """`function` over pandas frames that each hold every row of the groups they contain,
    each group's rows sorted by `order` (columns that tell a group's rows apart).

    Rows are collected per group (`keys`: the columns a group shares, kept once), so one Arrow
    batch carries whole groups, and many of them: one Python call per batch, not per group as
    `applyInPandas` would make. The worker flattens each batch back into one row per element.
    `collect_list` gathers a group's rows in the order the shuffle delivers them, which
    another plan of the same rows (or a rerun on a cluster) changes. A group's floats are
    sums over its rows (one matrix product a query), so that order moved scores in their
    last bit: sorted, the same rows give the same floats."""
    others = [c for c in frame.columns if c not in keys]
    grouped = frame.groupBy(*keys).agg(F.collect_list(F.struct(*others)).alias(_GROUP_ROWS))

    def run(batches: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        freeze_long_lived()  # a pass's frames churn objects: keep the worker's own unscanned
        for batch in batches:
            yield function(_flatten(batch, keys, others, order))

    return grouped.mapInPandas(run, schema)


def _flatten(
    batch: pd.DataFrame, keys: list[str], others: list[str], order: Sequence[str]
) -> pd.DataFrame:
    counts = batch[_GROUP_ROWS].map(len).to_numpy()
    flat: dict[str, object] = {key: np.repeat(batch[key].to_numpy(), counts) for key in keys}
    rows = [row for group in batch[_GROUP_ROWS] for row in group]
    flat |= {column: [row[column] for row in rows] for column in others}
    return rows_in_order(pd.DataFrame(flat), counts, order)


def rows_in_order(rows: pd.DataFrame, counts: np.ndarray, order: Sequence[str]) -> pd.DataFrame:
    """Groups of consecutive rows (`counts` rows each), each group's rows sorted by `order`
    (stable: rows equal in `order` keep their places); the groups stay where they are."""
    if not order or len(rows) == 0:
        return rows
    group = np.repeat(np.arange(len(counts)), counts)
    keys = pd.DataFrame({f"k{i}": rows[column].to_numpy() for i, column in enumerate(order)})
    keys.insert(0, "group", group)
    sorted_keys = keys.sort_values(list(keys.columns), kind="stable")
    return rows.take(sorted_keys.index.to_numpy()).reset_index(drop=True)


def split_top_level(schema: str) -> list[str]:
    """A DDL schema's fields, split at the commas outside `<...>` and `(...)`."""
    parts, depth, current = [], 0, ""
    for char in schema:
        depth += char in "<("
        depth -= char in ">)"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def schema_columns(schema: str) -> list[str]:
    """The column names of a DDL schema."""
    return [part.strip().split(" ")[0] for part in split_top_level(schema)]
