"""What the notebooks of `notebooks/` share, so that each runs unchanged on a cluster and as a
local script.

On Databricks a notebook's parameters are widgets, and `display` renders tables and figures.
Run locally (`.venv/bin/python notebooks/02_pipeline_results.py --env local`), the parameters
are command-line options, tables print as text and figures are saved to `--figures` (when
given). Either way the notebook gets the same configuration and Spark session as the jobs.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from jobrec_core.config import JobrecConfig
from jobrec_core.platform.logs import setup_logging
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, config_from_args

# Widget values for the repeatable `--set`: one `key=value` per line (or separated by `;`).
OVERRIDES_WIDGET = "set"
CONF_DIR_WIDGET = "conf_dir"
# Where the bundle syncs conf/, seen from the synced notebooks (their working directory).
SYNCED_CONF_DIR = "../conf"
SHOWN_ROWS = 50


def on_databricks() -> bool:
    return "DATABRICKS_RUNTIME_VERSION" in os.environ


@dataclass(frozen=True)
class Parameter:
    """A notebook parameter: a widget on Databricks, `--<name>` locally."""

    name: str
    default: str
    help: str


@dataclass(frozen=True)
class Notebook:
    config: JobrecConfig
    spark: SparkSession
    arguments: argparse.Namespace
    figures: Path | None

    def parameter(self, name: str) -> str:
        return str(getattr(self.arguments, name))

    def table(self, frame: pd.DataFrame | DataFrame, title: str) -> None:
        """A table: rendered by `display` on Databricks, printed as text locally."""
        if on_databricks():
            print(title)
            _databricks_display(frame)
            return
        shown = frame.limit(SHOWN_ROWS).toPandas() if isinstance(frame, DataFrame) else frame
        print(f"\n{title}\n{shown.head(SHOWN_ROWS).to_string(index=False)}")

    def figure(self, figure: Any, name: str) -> None:
        """A matplotlib figure: displayed on Databricks, saved as `<figures>/<name>` locally."""
        import matplotlib.pyplot as plt

        if on_databricks():
            _databricks_display(figure)
        elif self.figures is not None:
            self.figures.mkdir(parents=True, exist_ok=True)
            figure.savefig(self.figures / name, dpi=90)
            print(f"\n[figure] {self.figures / name}")
        plt.close(figure)


def open_notebook(description: str, *parameters: Parameter) -> Notebook:
    """Parse the notebook's parameters, load the configuration, get the Spark session."""
    parser = add_common_arguments(argparse.ArgumentParser(description=description))
    parser.add_argument("--figures", default=None, help="folder for the figures (local runs)")
    for parameter in parameters:
        parser.add_argument(f"--{parameter.name}", default=parameter.default, help=parameter.help)
    argv = _widget_arguments(parameters) if on_databricks() else sys.argv[1:]
    arguments = parser.parse_args(argv)
    setup_logging()
    config = config_from_args(arguments)
    figures = Path(arguments.figures) if arguments.figures else None
    return Notebook(config, get_spark(config), arguments, figures)


def _widget_arguments(parameters: tuple[Parameter, ...]) -> list[str]:
    """The widgets (created with their defaults on first run) as command-line arguments."""
    from databricks.sdk.runtime import dbutils

    widgets = dbutils.widgets
    # No target by default: the bundle target is for the user to name (databricks,prod), and
    # databricks alone stops at once with the reason (an empty storage root).
    widgets.text("env", "databricks", "configuration overlays, e.g. databricks,prod")
    widgets.text(CONF_DIR_WIDGET, SYNCED_CONF_DIR, "folder of the configuration files")
    widgets.text(OVERRIDES_WIDGET, "", "overrides, one key=value per line")
    for parameter in parameters:
        widgets.text(parameter.name, parameter.default, parameter.help)
    names = ["env", CONF_DIR_WIDGET, OVERRIDES_WIDGET, *(p.name for p in parameters)]
    return widget_arguments({name: widgets.get(name) for name in names}, parameters)


def widget_arguments(values: dict[str, str], parameters: tuple[Parameter, ...]) -> list[str]:
    """Widget values as the command line a local run would take."""
    argv = ["--env", values["env"], "--conf-dir", values[CONF_DIR_WIDGET]]
    for line in values[OVERRIDES_WIDGET].replace(";", "\n").splitlines():
        if line.strip():
            argv += ["--set", line.strip()]
    for parameter in parameters:
        argv += [f"--{parameter.name}", values[parameter.name]]
    return argv


def _databricks_display(value: Any) -> None:
    from databricks.sdk.runtime import display

    display(value)
