"""The local node's state file and start lock against processes that are not (or not yet)
the node: no Elasticsearch is started here, the 'node' is a sleeping process whose command
line names the launcher and the work folder, as the node's does."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict

import pytest

from jobrec_core.config import load_config
from jobrec_core.platform.resources import process_identity
from jobrec_core.search.local_node import (
    LAUNCHER_CLASS,
    LOCK_FILE,
    LocalElasticsearch,
    LocalNodeError,
    NodeState,
    _free_port,
)


def sleeping(*arguments: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *arguments])


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def local_node(tmp_path) -> LocalElasticsearch:
    config = load_config(
        "local",
        [
            f"elasticsearch.local.workdir={tmp_path / 'es'}",
            "elasticsearch.local.start_timeout_s=2",
        ],
    )
    node = LocalElasticsearch(config.elasticsearch.local)
    node.workdir.mkdir(parents=True)
    return node


def record(node: LocalElasticsearch, pid: int, identity: str | None) -> None:
    state = NodeState(pid=pid, port=_free_port(), workdir=str(node.workdir), identity=identity)
    node.state_file.write_text(json.dumps(asdict(state)), encoding="utf-8")


@pytest.mark.parametrize("case", ["other command line", "other start time"])
def test_a_pid_now_owned_by_another_process_is_neither_reported_nor_stopped(
    tmp_path, processes, case
):
    """As after a reboot or the node's death: the recorded pid runs something else."""
    node = local_node(tmp_path)
    if case == "other command line":
        other = sleeping()
        identity = process_identity(other.pid)
    else:  # the node's command line, but not the process that was recorded
        other = sleeping(LAUNCHER_CLASS, str(node.workdir))
        identity = "another-boot:12345"
    processes.append(other)
    record(node, other.pid, identity)
    assert node.status() is None
    assert not node.state_file.exists()  # stale: removed
    assert node.stop() is False
    assert other.poll() is None  # still running: not ours to stop


def test_a_running_node_that_does_not_answer_is_waited_for_not_started_again(tmp_path, processes):
    node = local_node(tmp_path)
    sleeper = sleeping(LAUNCHER_CLASS, str(node.workdir))
    processes.append(sleeper)
    record(node, sleeper.pid, process_identity(sleeper.pid))
    assert node.status() is not None
    with pytest.raises(LocalNodeError, match=rf"pid {sleeper.pid}\) is running but has not"):
        node.start()
    assert sleeper.poll() is None  # left running
    assert json.loads(node.state_file.read_text())["pid"] == sleeper.pid  # state kept
    assert not node.log_file.exists()  # no second JVM was launched on its data folder


def test_one_start_at_a_time(tmp_path):
    """A start that finds the lock held waits for it, and says so if it is never freed."""
    node = local_node(tmp_path)
    with open(node.workdir / LOCK_FILE, "a", encoding="utf-8") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(LocalNodeError, match="another command has been starting the node"):
            node.start()
    assert not node.log_file.exists()  # nothing was launched meanwhile
