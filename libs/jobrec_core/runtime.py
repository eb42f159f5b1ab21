"""What every entry point shares: the common arguments, configuration and logging."""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from jobrec_core.config import ConfigError, JobrecConfig, load_config
from jobrec_core.platform.logs import setup_logging

# The stage job running (its module's name: `generate_data`), set by `entry_point` for
# `start_job`, which forgets the step of `jobrec run` the job rewrites (`pipeline.JOB_STEPS`).
_JOB: ContextVar[str | None] = ContextVar("jobrec_job", default=None)


class _Overlays(argparse.Action):
    """Repeated `--env` layers its overlays in order, kept as one comma-separated string (what
    `load_config` and a notebook's `env` widget take); the default applies only when none is
    given (argparse's `append` would keep it as the first overlay)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        # Not `chosen is self.default`: `--env local` typed in Python source is that very string
        # object, and a later `--env seed` would then drop it.
        marker = f"_{self.dest}_given"
        chosen = getattr(namespace, self.dest)
        given = f"{chosen},{values}" if getattr(namespace, marker, False) else str(values)
        setattr(namespace, self.dest, given)
        setattr(namespace, marker, True)


def add_common_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--env`, `--conf-dir` and repeatable `--set key=value`, identical for every job."""
    parser.add_argument(
        "--env",
        default="local",
        action=_Overlays,
        metavar="ENV[,ENV]",
        help="configuration overlay conf/<env>.yaml, merged over conf/base.yaml; repeat it "
        "(or separate names by commas) to layer several in order, e.g. --env databricks "
        "--env prod (default: local)",
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
    parser.add_argument(
        "--job-run-id",
        default=None,
        help="the Databricks job run that started this task (the bundle passes "
        "{{job.run_id}}), tagged on the stage's MLflow run (default: $JOBREC_JOB_RUN_ID)",
    )
    return parser


def config_from_args(args: argparse.Namespace) -> JobrecConfig:
    return load_config(args.env, args.overrides, args.conf_dir)


def start_job(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> tuple[argparse.Namespace, JobrecConfig]:
    """What every entry point does first: parse its arguments, set up logging, load config;
    run by `entry_point`, then drop the step the job rewrites, and every later one, from the
    state `jobrec run` recorded for the preset, so that a rerun does not reuse them."""
    args = parser.parse_args(argv)
    setup_logging()
    if args.job_run_id:
        # Imported here, not at the top: the tracking module imports MLflow, slow to import.
        from jobrec_core.platform.tracking import JOB_RUN_ID_ENV

        # The stages read it where they open their MLflow runs (`tracking.log_stage_inputs`),
        # however deep in the stage; so do the processes they start.
        os.environ[JOB_RUN_ID_ENV] = args.job_run_id
    config = config_from_args(args)
    job = _JOB.get()
    if job is not None:
        # Imported here: the pipeline imports Spark, which `jobrec config` does without.
        from jobrec_core.pipeline import forget_job

        forget_job(config, job)
    return args, config


def entry_point(main: Callable[[], int]) -> Callable[[], None]:
    """The wheel's console script for a job (`jobrec-<stage>`), and its `__main__`.

    A Databricks Python wheel task calls the entry point's function and ignores what it returns,
    so a job that reports failure by its return value would pass there. This wrapper turns a
    non-zero status into `SystemExit`, which fails the task, the console script and
    `spark-submit` alike; success returns normally. A configuration mistake is the user's, not
    a bug: its message and status 2, as `jobrec` gives them, without a traceback."""
    job = job_name(main)

    def run() -> None:
        with stage_job(job):
            try:
                status = main()
            except ConfigError as error:
                print(f"{job}: {error}", file=sys.stderr)
                raise SystemExit(2) from None
        if status:
            raise SystemExit(status)

    run.__doc__ = f"Run {main.__module__} with the arguments of the command line."
    return run


def job_name(main: Callable[[], int]) -> str:
    """The stage job `main` belongs to: its module's file name (`build_pairs`; `__main__` too
    when the module runs as a script)."""
    return Path(inspect.getfile(main)).stem


@contextmanager
def stage_job(name: str) -> Iterator[None]:
    """Within it, :func:`start_job` starts stage job `name`, and forgets the step of
    `jobrec run` that the job rewrites (`pipeline.JOB_STEPS`)."""
    token = _JOB.set(name)
    try:
        yield
    finally:
        _JOB.reset(token)
