"""The local Elasticsearch node: a real Elasticsearch 8 server the project starts itself.

Elastic publishes the server and its HTTP module to Maven Central but not the distribution, so
`scripts/setup.sh` lays out the jars (see `jvm/pom.xml`) and this module runs them with the
project's launcher (`jvm/es-launcher`). The node binds to 127.0.0.1 only, keeps its data under
`elasticsearch.local.workdir`, and records its pid and port in `node.json` there, which is how
every other command finds it. A restarted node takes its previous port back when it is free, so
clients (and a job waiting to retry) find it where it was.

The state file also records the process's identity (the boot and its start time): after a
reboot, or once the node has died, its pid may belong to another process, and that process
is neither reported as the node nor stopped. A node that is alive but slow to answer is
waited for, never started a second time on the same data folder.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from jobrec_core.config import LocalEsConfig
from jobrec_core.platform.resources import process_identity

log = logging.getLogger(__name__)

LAUNCHER_CLASS = "jobrec.es.LocalNode"
STATE_FILE = "node.json"
PORT_FILE = "last_port"
LOCK_FILE = "start.lock"
MIN_JAVA = 17


# The node's name as a service beside a pipeline's processes (`platform.resources.CpuTime`).
SERVICE_NAME = "Elasticsearch node"


class LocalNodeError(RuntimeError):
    """The local node cannot be started, reached or stopped; the message says what to do."""


@dataclass(frozen=True)
class NodeState:
    pid: int
    port: int
    workdir: str
    # `platform.resources.process_identity(pid)` when the node started; None in state files
    # written before it was recorded, or where /proc cannot tell.
    identity: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class LocalElasticsearch:
    """Start, stop and inspect the project's single-node cluster."""

    def __init__(self, settings: LocalEsConfig) -> None:
        self.settings = settings
        self.workdir = Path(settings.workdir)
        self.jars = Path(settings.jars_dir)

    @property
    def state_file(self) -> Path:
        return self.workdir / STATE_FILE

    @property
    def log_file(self) -> Path:
        return self.workdir / "node.log"

    def status(self) -> NodeState | None:
        """The running node, or None; a stale state file (its process dead, or its pid now
        another process's) is removed."""
        state = self._read_state()
        if state is None:
            return None
        if not _process_alive(state.pid) or not _same_process(state):
            self.state_file.unlink(missing_ok=True)
            return None
        return state

    def start(self) -> NodeState:
        """Start the node (or return the running one) and wait until its health is green. A
        running node that does not answer yet is waited for, not started again. One start
        at a time per work folder (a lock file): a second command waits for the first, then
        finds its node."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self._start_lock():
            return self._start()

    @contextmanager
    def _start_lock(self) -> Iterator[None]:
        path = self.workdir / LOCK_FILE
        with open(path, "a", encoding="utf-8") as lock:
            deadline = time.monotonic() + self.settings.start_timeout_s
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise LocalNodeError(
                            f"another command has been starting the node in {self.workdir} for "
                            f"over {self.settings.start_timeout_s:.0f}s (it holds {path})"
                        ) from None
                    time.sleep(0.2)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _start(self) -> NodeState:
        running = self.status()
        if running is not None:
            if _health(running.url) is None:
                log.info(
                    "Elasticsearch (pid %d) is running but not answering at %s yet: waiting",
                    running.pid,
                    running.url,
                )
                self._wait_until_healthy(running, None)
            log.info("Elasticsearch already running at %s (pid %d)", running.url, running.pid)
            return running
        java = _find_java()
        module_path, launcher = self._check_jars()
        (self.workdir / "tmp").mkdir(exist_ok=True)
        port = self.settings.port or self._previous_port() or _free_port()
        command = [
            java,
            f"-Xms{self.settings.heap}",
            f"-Xmx{self.settings.heap}",
            "-XX:+UseG1GC",
            f"-Djava.io.tmpdir={self.workdir / 'tmp'}",
            "-Dlog4j2.disable.jmx=true",
            "--module-path",
            str(module_path),
            "--add-modules=ALL-MODULE-PATH",
            "-cp",
            str(launcher),
            LAUNCHER_CLASS,
            str(self.jars),
            str(self.workdir),
            str(port),
            *[f"{key}={value}" for key, value in sorted(self.settings.settings.items())],
        ]
        log.info("starting Elasticsearch on 127.0.0.1:%d (data in %s)", port, self.workdir)
        with open(self.log_file, "ab") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        state = NodeState(
            pid=process.pid,
            port=port,
            workdir=str(self.workdir),
            identity=process_identity(process.pid),
        )
        self.state_file.write_text(json.dumps(asdict(state)), encoding="utf-8")
        (self.workdir / PORT_FILE).write_text(str(port), encoding="utf-8")
        self._wait_until_healthy(state, process)
        log.info("Elasticsearch is up at %s (pid %d)", state.url, state.pid)
        return state

    def stop(self, purge: bool = False, timeout_s: float = 30.0) -> bool:
        """Stop the node; `purge` also deletes its data. Returns whether a node was running."""
        state = self.status()
        if state is not None:
            log.info("stopping Elasticsearch (pid %d)", state.pid)
            _terminate(state.pid, timeout_s)
        self.state_file.unlink(missing_ok=True)
        if purge and self.workdir.exists():
            shutil.rmtree(self.workdir)
        return state is not None

    def _read_state(self) -> NodeState | None:
        try:
            return NodeState(**json.loads(self.state_file.read_text(encoding="utf-8")))
        except (FileNotFoundError, ValueError, TypeError):
            return None

    def _previous_port(self) -> int | None:
        try:
            port = int((self.workdir / PORT_FILE).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        return port if _port_free(port) else None

    def _check_jars(self) -> tuple[Path, Path]:
        module_path = self.jars / "lib"
        launcher = self.jars / "launcher" / "jobrec-es-launcher.jar"
        missing = [
            str(p)
            for p in (module_path, launcher, self.jars / "modules" / "transport-netty4")
            if not p.exists()
        ]
        if missing:
            raise LocalNodeError(
                "Elasticsearch jars not found: "
                + ", ".join(missing)
                + ". Run scripts/setup.sh (it fetches them from Maven Central)."
            )
        return module_path, launcher

    def _wait_until_healthy(self, state: NodeState, launched: subprocess.Popen | None) -> None:
        """Wait for `state`'s node to answer green or yellow. A node `launched` here is
        stopped if it does not; a node found running is left as it is, with an error."""
        deadline = time.monotonic() + self.settings.start_timeout_s
        while time.monotonic() < deadline:
            exited = launched.poll() is not None if launched else not _process_alive(state.pid)
            if exited:
                self.state_file.unlink(missing_ok=True)
                code = f" with code {launched.returncode}" if launched else ""
                raise LocalNodeError(
                    f"Elasticsearch (pid {state.pid}) exited{code} while starting. "
                    f"Last lines of {self.log_file}:\n{_tail(self.log_file)}"
                )
            if _health(state.url) in ("green", "yellow"):
                return
            time.sleep(0.5)
        timeout = self.settings.start_timeout_s
        if launched is None:
            raise LocalNodeError(
                f"Elasticsearch (pid {state.pid}) is running but has not answered at {state.url} "
                f"for {timeout:.0f}s; it was left running. See {self.log_file}, or restart it: "
                "jobrec es stop, then jobrec es start."
            )
        _terminate(launched.pid, 10)
        self.state_file.unlink(missing_ok=True)
        raise LocalNodeError(
            f"Elasticsearch did not become healthy within {timeout:.0f}s. "
            f"Last lines of {self.log_file}:\n{_tail(self.log_file)}"
        )


def _find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise LocalNodeError(
            f"Java {MIN_JAVA}+ is needed for the local Elasticsearch node and was not found "
            "(set JAVA_HOME or put java on PATH)."
        )
    banner = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)', banner)
    if match is None or int(match.group(1)) < MIN_JAVA:
        raise LocalNodeError(
            f"Java {MIN_JAVA}+ is needed for the local Elasticsearch node; {java} reports: "
            f"{banner.strip().splitlines()[0] if banner.strip() else 'nothing'}"
        )
    return java


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_free(port: int) -> bool:
    """Whether the node could listen on `port`; as Elasticsearch does, ignoring TIME_WAIT."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _health(url: str) -> str | None:
    try:
        with urllib.request.urlopen(f"{url}/_cluster/health", timeout=2) as response:
            return str(json.loads(response.read())["status"])
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return None


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is not alive.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def _same_process(state: NodeState) -> bool:
    """Whether `state.pid` is still this project's node: its command line runs the launcher
    on `state.workdir`, and it is the process that was started (same identity). Each check
    is assumed to pass where it cannot be made (an older state file, no /proc)."""
    try:
        arguments = Path(f"/proc/{state.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        arguments = None
    if arguments is not None and not {
        LAUNCHER_CLASS.encode(),
        state.workdir.encode(),
    } <= set(arguments):
        return False
    now = process_identity(state.pid)
    return state.identity is None or now is None or now == state.identity


def _terminate(pid: int, timeout_s: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _process_alive(pid):
            return
        time.sleep(0.2)
    log.warning("Elasticsearch (pid %d) ignored SIGTERM for %.0fs; killing it", pid, timeout_s)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
