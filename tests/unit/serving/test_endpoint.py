"""The endpoint's HTTP framing, over real sockets: a malformed or stalled request is answered
with a 4xx and its connection closed, never a 500, a dropped connection or an answer out of
step. These requests are refused before a recommendation is asked for, so the server here
holds a recommender that only answers `/health` (the whole path: the integration tests)."""

from __future__ import annotations

import logging
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from jobrec_core.serving.endpoint import RecommendServer
from tests.helpers import serving

TIMEOUT_S = 0.5


class HealthOnly:
    """Answers `/health`; any recommendation request reaching it fails the test."""

    def health(self) -> dict[str, Any]:
        return {"status": "ok"}

    def parse(self, body: bytes) -> Any:
        raise AssertionError(f"a refused request reached the recommender: {body[:40]!r}")


@pytest.fixture()
def server() -> Iterator[RecommendServer]:
    with serving(HealthOnly(), TIMEOUT_S) as running:
        yield running


def exchange(server: RecommendServer, raw: bytes, wait_s: float = 5.0) -> bytes:
    """Sends `raw` on a new connection and reads until the server closes it."""
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), port), timeout=wait_s) as connection:
        connection.sendall(raw)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
        return received


def statuses(answer: bytes) -> list[int]:
    """The status of each answer on the connection (a body is not followed by a line break)."""
    return [int(status) for status in re.findall(rb"HTTP/1\.[01] (\d{3}) ", answer)]


def post(path: str, headers: bytes, body: bytes = b"") -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: x\r\n".encode() + headers + b"\r\n" + body


@pytest.mark.parametrize(
    ("content_length", "reason"),
    [
        (b"\xb2", b"must be a byte count"),  # "\u00b2": `str.isdigit` takes it, `int` does not
        (b"9" * 5000, b"must be a byte count"),
        (b"-1", b"must be a byte count"),
    ],
)
def test_a_malformed_content_length_is_a_400_and_closes(server, content_length, reason):
    answer = exchange(server, post("/recommend", b"Content-Length: " + content_length + b"\r\n"))
    assert statuses(answer) == [400] and reason in answer


def test_an_unused_body_of_unknown_length_closes_the_connection_with_its_answer(server):
    answer = exchange(server, post("/nowhere", b"Content-Length: \xb2\r\n"))
    assert statuses(answer) == [404]


def test_a_chunked_body_is_a_411_and_is_never_read_as_the_next_request(server):
    chunked = post("/recommend", b"Transfer-Encoding: chunked\r\n", b"2\r\n{}\r\n0\r\n\r\n")
    answer = exchange(server, chunked + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert statuses(answer) == [411]


def test_a_stalled_body_is_a_408_after_the_timeout(server):
    started = time.perf_counter()
    answer = exchange(server, post("/recommend", b"Content-Length: 100\r\n", b"{"))
    assert statuses(answer) == [408] and b"did not arrive within 0.5 s" in answer
    assert time.perf_counter() - started < 4


def test_an_idle_connection_is_closed_after_the_timeout(server):
    assert exchange(server, b"") == b""


def test_kept_alive_requests_are_answered_in_order(server):
    health = b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    assert statuses(exchange(server, health * 2)) == [200, 200]


def test_a_refused_request_line_is_not_logged_with_the_previous_path(server, caplog):
    with caplog.at_level(logging.INFO, logger="jobrec_core.serving.endpoint"):
        answer = exchange(server, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nNOT-HTTP\r\n\r\n")
    # a request line without a version is answered as HTTP/0.9 does: the body alone
    assert statuses(answer) == [200]
    assert answer.endswith(b'{"error": "Bad request syntax (\'NOT-HTTP\')"}')
    logged = [r.getMessage() for r in caplog.records if " 400" in r.getMessage()]
    assert logged and all("/health" not in line for line in logged)
