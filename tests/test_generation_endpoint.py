"""The endpoint client against a server on 127.0.0.1 that misbehaves on purpose: 429 with Retry-After,
5xx, replies slower than the timeout, bodies that are not JSON, dropped connections, a request that
always fails, statuses that refuse every request, and answers given as they arrive."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tooltune.generation import (
    BackendError,
    EndpointUnavailable,
    GenerationFailure,
    GenerationRequest,
    OpenAIBackend,
    Tolerant,
    stream_results,
)
from tooltune.generation.endpoint import RETRY_AFTER_MAX, retry_after

Plan = Callable[[str, int], str]
"""(the request's last user message, its attempt number from 1) -> what the server does: "ok", "429"
(with Retry-After: 1), "500", "503", "400", "404", "slow" (answers after 1.5 s), "badjson", "deep" (JSON
nested 100,000 levels), "drop" (closes the connection without an answer), "cut" (closes it in the
middle of the body)."""


class FlakyServer:
    """An OpenAI-compatible chat/completions endpoint whose every answer a `Plan` decides; an answer is
    ``answer:<the last user message>``. `times` holds (message, attempt, monotonic time) of each request."""

    def __init__(self, plan: Plan | None = None, delay: float = 0.0) -> None:
        self.plan = plan or (lambda text, attempt: "ok")
        self.delay = delay
        self.times: list[tuple[str, int, float]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = body["messages"][-1]["content"]
                with outer.lock:
                    attempt = 1 + sum(1 for t, _, _ in outer.times if t == text)
                    outer.times.append((text, attempt, time.monotonic()))
                action = outer.plan(text, attempt)
                if outer.delay:
                    time.sleep(outer.delay)
                answer = json.dumps({"choices": [{"index": 0, "message": {
                    "role": "assistant", "content": f"answer:{text}"}}]}).encode()
                if action in ("429", "500", "503", "400", "404"):
                    wait = {"Retry-After": "1"} if action == "429" else None
                    self._send(int(action), b'{"error": "no"}', wait)
                elif action == "slow":
                    time.sleep(1.5)
                    self._send(200, answer)
                elif action == "badjson":
                    self._send(200, b"<html>upstream error</html>")
                elif action == "deep":
                    self._send(200, b"[" * 100_000 + b"]" * 100_000)
                elif action in ("drop", "cut"):
                    if action == "cut":
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(answer)))
                        self.end_headers()
                        self.wfile.write(answer[:10])
                        self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                else:
                    self._send(200, answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.handle_error = lambda *a: None  # a client that gave up on a slow answer: expected
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def attempts(self, text: str) -> list[float]:
        return [t for m, _, t in self.times if m == text]

    def __enter__(self) -> FlakyServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _requests(n: int) -> list[GenerationRequest]:
    return [GenerationRequest([{"role": "user", "content": f"e{i}"}], id=f"e{i}") for i in range(n)]


def _backend(server: FlakyServer, **kw: object) -> OpenAIBackend:
    opts = {"retries": 3, "backoff": 0.01, "timeout": 0.8, "concurrency": 4} | kw
    return OpenAIBackend(server.url, "m", **opts)  # type: ignore[arg-type]


def test_every_transient_failure_is_retried_and_the_answers_are_those_of_a_clean_server() -> None:
    kinds = ["500", "503", "slow", "badjson", "drop", "cut", "deep"]

    def plan(text: str, attempt: int) -> str:
        i = int(text[1:])
        return kinds[i % len(kinds)] if attempt == 1 and i < len(kinds) else "ok"

    with FlakyServer(plan) as server:
        got = dict(stream_results(_backend(server), _requests(10)))
    assert got == {i: [f"answer:e{i}"] for i in range(10)}
    assert [len(server.attempts(f"e{i}")) for i in range(10)] == [2] * 7 + [1] * 3


def test_429_waits_for_retry_after() -> None:
    with FlakyServer(lambda text, attempt: "429" if attempt == 1 else "ok") as server:
        out = _backend(server, backoff=0.0).generate(_requests(1))
    first, second = server.attempts("e0")
    assert out == [["answer:e0"]] and second - first >= 0.95  # the server's Retry-After: 1, not the backoff
    assert retry_after("2.5") == 2.5 and retry_after("junk") is None
    assert retry_after("99999") == RETRY_AFTER_MAX
    assert 0 < retry_after(time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))) <= 30


def test_a_request_that_always_fails_is_a_failure_and_the_others_are_answered() -> None:
    with FlakyServer(lambda text, attempt: "500" if text == "e3" else "ok") as server:
        backend = _backend(server, retries=2)
        got = dict(stream_results(backend, _requests(8)))
        assert isinstance(got[3], GenerationFailure) and got[3].kind == "http_500" and got[3].attempts == 3
        assert "request e3" in got[3].reason and "after 3 attempt(s): HTTP 500" in got[3].reason
        assert {i: v for i, v in got.items() if i != 3} == {i: [f"answer:e{i}"] for i in range(8) if i != 3}
        with pytest.raises(BackendError, match=r"request e3: .* after 3 attempt\(s\): HTTP 500"):
            backend.generate(_requests(8))  # training's contract: every completion or an error


def test_a_status_retrying_cannot_fix_fails_at_once_and_one_refusing_every_request_stops_all() -> None:
    with FlakyServer(lambda text, attempt: "400" if text == "e1" else "ok") as server:
        got = dict(stream_results(_backend(server, retries=5), _requests(3)))
    assert got[1].kind == "http_400" and len(server.attempts("e1")) == 1
    with FlakyServer(lambda text, attempt: "404") as server, \
            pytest.raises(EndpointUnavailable, match="refuses the request: HTTP 404"):
        list(stream_results(_backend(server, retries=5), _requests(3)))


def test_a_server_that_is_gone_stops_the_stream_in_seconds() -> None:
    with FlakyServer() as server:
        url = server.url
    start = time.monotonic()
    with pytest.raises(EndpointUnavailable, match=r"after 2 attempt\(s\).*is the server running"):
        list(stream_results(OpenAIBackend(url, "m", retries=1, backoff=0.01, timeout=2), _requests(20)))
    assert time.monotonic() - start < 5


def test_answers_come_as_they_arrive_not_per_batch() -> None:
    with FlakyServer(lambda text, attempt: "slow" if text == "e0" else "ok") as server:
        order = [i for i, _ in stream_results(_backend(server, timeout=5, concurrency=4), _requests(6))]
    assert order[-1] == 0 and sorted(order) == list(range(6))


def test_a_timeout_bounds_each_attempt() -> None:
    with FlakyServer(lambda text, attempt: "slow") as server:
        start = time.monotonic()
        got = dict(stream_results(_backend(server, retries=1, timeout=0.3), _requests(1)))
    assert got[0].kind == "timeout" and got[0].attempts == 2 and time.monotonic() - start < 3


def test_tolerant_answers_a_failed_request_empty_and_does_not_ask_for_its_id_again() -> None:
    with FlakyServer(lambda text, attempt: "500" if text == "e1" else "ok") as server:
        tolerant = Tolerant(_backend(server, retries=1))
        assert tolerant.generate(_requests(3)) == [["answer:e0"], [""], ["answer:e2"]]
        assert tolerant.generate(_requests(2)) == [["answer:e0"], [""]]
    assert list(tolerant.failures) == ["e1"] and len(server.attempts("e1")) == 2
    assert tolerant.name == tolerant.backend.name and tolerant.concurrency == 4
