"""What every entry point shares: the common arguments, configuration and logging."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from jobrec_core.config import JobrecConfig, load_config
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


def add_common_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--env`, `--conf-dir` and repeatable `--set key=value`, identical for every job."""
    parser.add_argument(
        "--env", default="local", help="configuration overlay: conf/<env>.yaml (default: local)"
    )
    parser.add_argument(
        "--conf-dir", default=None, help="folder of base.yaml and the overlays (default: ./conf)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting, e.g. --set cleaning.wmd_similarity_threshold=0.5",
    )
    return parser


def config_from_args(args: argparse.Namespace) -> JobrecConfig:
    return load_config(args.env, args.overrides, args.conf_dir)


def start_job(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> tuple[argparse.Namespace, JobrecConfig]:
    """What every entry point does first: parse its arguments, set up logging, load config."""
    args = parser.parse_args(argv)
    setup_logging()
    return args, config_from_args(args)


def setup_logging(level: int = logging.INFO) -> None:
    """Progress goes to stderr; results a job prints go to stdout."""
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr, force=True)
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    quiet_petastorm()


def entry_point(main: Callable[[], int]) -> Callable[[], None]:
    """The wheel's console script for a job (`jobrec-<stage>`), and its `__main__`.

    A Databricks Python wheel task calls the entry point's function and ignores what it returns,
    so a job that reports failure by its return value would pass there. This wrapper turns a
    non-zero status into `SystemExit`, which fails the task, the console script and
    `spark-submit` alike; success returns normally."""

    def run() -> None:
        status = main()
        if status:
            raise SystemExit(status)

    run.__doc__ = f"Run {main.__module__} with the arguments of the command line."
    return run
