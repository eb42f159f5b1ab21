"""The log format every job and every training process uses. Spark-free, so a training worker
on a machine without Spark or the configuration's libraries logs the same way."""

from __future__ import annotations

import logging
import sys

from jobrec_core.platform.quiet import quiet_petastorm

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
NOISY_LOGGERS = (
    "py4j",
    "elastic_transport",
    "urllib3",
    "alembic",
    "mlflow.store.db",
    "gensim",
    "petastorm",  # logs every reader's schema inference at INFO
)


def setup_logging(level: int = logging.INFO) -> None:
    """Progress goes to stderr; results a job prints go to stdout."""
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr, force=True)
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    quiet_petastorm()
