"""`worker_daemon`, the module Spark's Python daemon runs locally before it forks workers.

Spark reads the daemon's port from its standard output, so importing the module must print
nothing there; and the local configuration must name a module that exists."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

from jobrec_core.config import load_config
from tests.helpers import REPO


def test_the_local_configuration_forks_workers_from_the_project_daemon() -> None:
    config = load_config("local", conf_dir=REPO / "conf")
    module = config.spark.conf["spark.python.daemon.module"]
    assert module == "jobrec_core.worker_daemon"
    assert importlib.util.find_spec(module) is not None


def test_importing_the_daemon_writes_nothing_to_standard_output() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import jobrec_core.worker_daemon"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )
    assert done.stdout == ""
