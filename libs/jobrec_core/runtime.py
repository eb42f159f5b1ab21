"""What every entry point shares: the common arguments, configuration and logging."""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Sequence

from jobrec_core.config import JobrecConfig, load_config

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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
    for noisy in ("py4j", "elastic_transport", "urllib3", "alembic", "mlflow.store.db", "gensim"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # petastorm 0.13 uses pyarrow's legacy dataset API, the only one its pinned pyarrow 14
    # supports (STACK.md); the deprecation warnings on every read say nothing actionable.
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"petastorm(\.|$)")
