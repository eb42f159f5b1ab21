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
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jobrec_core.serving.online import OnlineRecommender, RequestError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20  # a candidate's jobs fit in a few kB: refuse anything far larger
ROUTES = {"/recommend": "POST", "/health": "GET"}


class RecommendServer(ThreadingHTTPServer):
    """A threading HTTP server that holds the recommender its handlers share."""

    daemon_threads = True  # a client holding a connection open never blocks shutdown

    def __init__(self, address: tuple[str, int], recommender: OnlineRecommender) -> None:
        super().__init__(address, RecommendHandler)
        self.recommender = recommender

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

    def do_GET(self) -> None:
        if self._route("GET"):
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
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise RequestError(411, "a Content-Length header is required")
        if int(length) > MAX_BODY_BYTES:
            self.close_connection = True  # the unread body would be taken for the next request
            raise RequestError(413, f"the body is over {MAX_BODY_BYTES} bytes")
        return self.rfile.read(int(length))

    def _drain(self) -> None:
        """Reads a body the route will not use, so that the connection stays usable."""
        length = self.headers.get("Content-Length", "0")
        if length.isdigit() and int(length) <= MAX_BODY_BYTES:
            self.rfile.read(int(length))
        else:
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


def serve(recommender: OnlineRecommender, host: str, port: int) -> RecommendServer:
    """A server bound to `host:port` (0: any free port), not yet serving: the caller runs
    `serve_forever()`, in a thread or not, and `shutdown()`."""
    return RecommendServer((host, port), recommender)
