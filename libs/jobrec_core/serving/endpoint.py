"""The online recommendations over HTTP, with the standard library's threading server.

    POST /recommend   {"jobs": [{"job_id": 17, "score": 9}, ...]} -> the top 10 as JSON
    GET  /health      the model, the index and the retriever being served

Every answer is JSON. A refused request gets its 4xx and `{"error": ...}` (`serving.online.
parse_request`); a failure while answering (Elasticsearch unreachable, say) gets 500 and is
logged with its traceback, and the server goes on. Each request logs one line with its status
and its time, split into the pipeline's parts for a recommendation.

The standard library's server, not a framework: one process, a handful of concurrent
clients, and nothing to install; each connection gets a thread, which waits on Elasticsearch
without holding the others up.
"""

from __future__ import annotations

import json
import logging
import re
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jobrec_core.serving.online import OnlineRecommender, RequestError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20  # a candidate's jobs fit in a few kB: refuse anything far larger
# A connection that sends nothing for this long (a stalled body, an idle keep-alive) is
# closed, so that no client holds a thread for ever.
REQUEST_TIMEOUT_S = 30.0
ROUTES = {"/recommend": "POST", "/health": "GET"}
# A Content-Length: ASCII digits alone (`str.isdigit` also takes "²", which `int` refuses), a
# few more than MAX_BODY_BYTES has, so that `int` never meets a huge number.
_BYTE_COUNT = re.compile(r"[0-9]{1,9}")


class RecommendServer(ThreadingHTTPServer):
    """A threading HTTP server that holds the recommender its handlers share."""

    daemon_threads = True  # a client holding a connection open never blocks shutdown

    def __init__(
        self,
        address: tuple[str, int],
        recommender: OnlineRecommender,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        super().__init__(address, RecommendHandler)
        self.recommender = recommender
        self.request_timeout_s = request_timeout_s

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class RecommendHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a client reuses its connection
    # The headers and the body leave in two writes: with Nagle's algorithm, the body waits for
    # the client's delayed ACK of the headers (40 ms on Linux) on a kept-alive connection.
    disable_nagle_algorithm = True
    server: RecommendServer

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout_s)

    def parse_request(self) -> bool:
        # A refused request line leaves the path unset: the log line must not name the path
        # of the connection's previous request.
        self.path = "?"
        return super().parse_request()

    def do_GET(self) -> None:
        if self._route("GET"):
            self._drain()  # a GET's body, if a client sent one, is not the next request
            self._answer(HTTPStatus.OK, self.server.recommender.health(), time.perf_counter())

    def do_POST(self) -> None:
        started = time.perf_counter()
        if not self._route("POST"):
            return
        try:
            request = self.server.recommender.parse(self._body())
            result = self.server.recommender.recommend(request)
        except RequestError as error:
            self._answer(error.status, error.as_json(), started, str(error))
            return
        except Exception as error:  # an answer, never a dropped connection
            log.exception("POST /recommend failed")
            self.close_connection = True  # where the request's bytes stopped is unknown
            self._answer(500, {"error": f"internal error: {type(error).__name__}"}, started)
            return
        note = f"candidate {result.candidate_id}, {len(request.jobs)} jobs, "
        self._answer(HTTPStatus.OK, result.as_json(), started, note + result.describe_timings())

    def _route(self, method: str) -> bool:
        """True when this path takes `method`; else answers 404 or 405."""
        path = self.path.split("?", 1)[0]
        if path not in ROUTES:
            self._drain()
            self._answer(404, {"error": f"no such path {path}; try {sorted(ROUTES)}"}, None)
            return False
        if ROUTES[path] != method:
            self._drain()
            allowed = {"Allow": ROUTES[path]}
            self._answer(405, {"error": f"{path} takes {ROUTES[path]}"}, None, headers=allowed)
            return False
        return True

    def _body(self) -> bytes:
        """The request's body, or a :class:`RequestError`. Every refusal closes the
        connection: the unread body (a chunked one, say) would be taken for the next
        request."""
        header = self.headers.get("Content-Length")
        length = _byte_count(header)
        if length is None or length > MAX_BODY_BYTES:
            self.close_connection = True
            if header is None:
                raise RequestError(411, "a Content-Length header is required")
            if length is None:
                raise RequestError(400, "the Content-Length header must be a byte count")
            raise RequestError(413, f"the body is over {MAX_BODY_BYTES} bytes")
        try:
            body = self.rfile.read(length)
        except TimeoutError as error:
            self.close_connection = True
            raise RequestError(
                408, f"the body did not arrive within {self.server.request_timeout_s:g} s"
            ) from error
        if len(body) < length:  # the client closed its side early
            self.close_connection = True
            raise RequestError(400, f"the body ended after {len(body)} of {length} bytes")
        return body

    def _drain(self) -> None:
        """Reads a body the route will not use, so that the connection stays usable; closes
        it where that body's end is unknown."""
        chunked = "Transfer-Encoding" in self.headers
        length = _byte_count(self.headers.get("Content-Length", "0"))
        if chunked or length is None or length > MAX_BODY_BYTES:
            self.close_connection = True
            return
        try:
            self.rfile.read(length)
        except TimeoutError:
            self.close_connection = True

    def _answer(
        self,
        status: int,
        payload: dict[str, Any],
        started: float | None,
        note: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        took = f" {(time.perf_counter() - started) * 1e3:.1f} ms" if started is not None else ""
        path = getattr(self, "path", "?")  # unset when the request line itself was refused
        log.info("%s %s %d%s%s", self.command, path, status, took, f": {note}" if note else "")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What the base class refuses itself (a malformed request line, an unsupported
        method) also gets a JSON answer."""
        self.close_connection = True
        self._answer(code, {"error": message or HTTPStatus(code).phrase}, None)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """The base class's access line is replaced by `_answer`'s, which has the timings."""

    def log_message(self, format: str, *args: Any) -> None:
        log.warning("%s: %s", self.address_string(), format % args)


def _byte_count(header: str | None) -> int | None:
    """A Content-Length header's value; None when absent or not a plain byte count."""
    return int(header) if header is not None and _BYTE_COUNT.fullmatch(header) else None


def serve(
    recommender: OnlineRecommender,
    host: str,
    port: int,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
) -> RecommendServer:
    """A server bound to `host:port` (0: any free port), not yet serving: the caller runs
    `serve_forever()`, in a thread or not, and `shutdown()`."""
    return RecommendServer((host, port), recommender, request_timeout_s)
