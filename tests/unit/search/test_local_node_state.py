"""The local node's state file against processes that are not (or not yet) the node: no
Elasticsearch is started here, the 'node' is a sleeping process."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import asdict

import pytest

from jobrec_core.config import load_config
from jobrec_core.search.local_node import (
    LocalElasticsearch,
    LocalNodeError,
    NodeState,
    _free_port,
    _process_identity,
)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen]:
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def node_with_state(tmp_path, pid: int, identity: str | None) -> LocalElasticsearch:
    config = load_config(
        "local",
        [
            f"elasticsearch.local.workdir={tmp_path / 'es'}",
            "elasticsearch.local.start_timeout_s=2",
        ],
    )
    node = LocalElasticsearch(config.elasticsearch.local)
    node.workdir.mkdir(parents=True)
    state = NodeState(pid=pid, port=_free_port(), workdir=str(node.workdir), identity=identity)
    node.state_file.write_text(json.dumps(asdict(state)), encoding="utf-8")
    return node


def test_a_pid_now_owned_by_another_process_is_neither_reported_nor_stopped(tmp_path, sleeper):
    """As after a reboot: the recorded pid runs something else, started at another time."""
    node = node_with_state(tmp_path, sleeper.pid, identity="another-boot:12345")
    assert node.status() is None
    assert not node.state_file.exists()  # stale: removed
    assert node.stop() is False
    assert sleeper.poll() is None  # still running: not ours to stop


def test_a_running_node_that_does_not_answer_is_waited_for_not_started_again(tmp_path, sleeper):
    node = node_with_state(tmp_path, sleeper.pid, identity=_process_identity(sleeper.pid))
    assert node.status() is not None
    with pytest.raises(LocalNodeError, match=rf"pid {sleeper.pid}\) is running but has not"):
        node.start()
    assert sleeper.poll() is None  # left running
    assert json.loads(node.state_file.read_text())["pid"] == sleeper.pid  # state kept
    assert not node.log_file.exists()  # no second JVM was launched on its data folder
