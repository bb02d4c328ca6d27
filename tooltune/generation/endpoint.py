"""Chat completions from an OpenAI-compatible server (vLLM, SGLang, a hosted API), bounded in every way.

`OpenAIBackend` sends each request as one POST on a worker thread, `concurrency` at a time, and gives
each answer as soon as it arrives (`stream`). What can go wrong with one request, and what happens:

- a status retrying can fix (408, 409, 425, 429, 5xx), a reply slower than `timeout`, a body that is
  not JSON or has no choices, a dropped connection: the request is sent again, at most `retries` times,
  after ``backoff * 2**attempt`` seconds plus jitter (at most `BACKOFF_MAX`), or after the server's
  ``Retry-After`` (seconds or an HTTP date, at most `RETRY_AFTER_MAX`) when it gives one;
- a status that says the request itself is refused (400, 413, 422: a prompt over the server's context,
  a content filter, a tool schema it rejects, and any other status not listed here): no retry;
- either way, once its attempts are spent the request is a `GenerationFailure` naming the cause; the
  other requests go on (`generate` still raises `BackendError` for it: training wants every completion);
- nothing accepts the connection (after the retries), or the server refuses the key or does not know
  the model (401, 403, 404, 405, 407): `EndpointUnavailable`, which stops every request;
- one attempt takes at most about twice `timeout` (each socket read waits at most `timeout`, and the
  body stops being read once `timeout` has passed) and reads at most `MAX_RESPONSE_BYTES`.

The standard library's HTTP client is enough for this; the ``openai`` package's client retries on a
fixed schedule of its own (at most 8 s between attempts, no retry past a ``Retry-After`` over two
minutes, none for a 200 whose body is not JSON) and is not a dependency of tooltune.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from tooltune.generation.base import BackendError, EndpointUnavailable, GenerationFailure, GenerationRequest
from tooltune.parsing import get_grammar
from tooltune.prompts import render_answer
from tooltune.schema import SchemaError, ToolCall

logger = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
"""Statuses after which a request is sent again."""
REFUSED_STATUS = frozenset({401, 403, 404, 405, 407})
"""Statuses that refuse every request (key, URL or model wrong): the run stops."""
BACKOFF_MAX = 60.0
"""Longest wait between two attempts without a ``Retry-After``."""
RETRY_AFTER_MAX = 120.0
"""Longest ``Retry-After`` honoured; a longer one is waited for this long."""
MAX_RESPONSE_BYTES = 64 << 20
"""Longest response body read; a longer one fails its attempt."""
_CHUNK = 1 << 16


def openai_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`messages` in the chat-completions form: an assistant turn's ``tool_calls`` get ids (``call_0``,
    ``call_1``, … unless they have one) and JSON-string arguments, and each ``tool`` message after it the
    id of the call it answers, in order."""
    out, pending, n = [], [], 0
    for msg in messages:
        m = dict(msg)
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls = []
            for call in m["tool_calls"]:
                f = call.get("function", call)
                args = f.get("arguments", {})
                calls.append({"id": call.get("id") or f"call_{n}", "type": "function", "function": {
                    "name": f.get("name"),
                    "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)}})
                n += 1
            m["tool_calls"], pending = calls, [c["id"] for c in calls]
        elif m.get("role") == "tool" and pending and "tool_call_id" not in m:
            m["tool_call_id"] = pending.pop(0)
        out.append(m)
    return out


def hermes_text(tool_calls: Sequence[Any]) -> str:
    """Structured ``tool_calls`` of a chat-completions reply as hermes ``<tool_call>`` blocks, one per call,
    arguments decoded from their JSON string. A call that is not a name with a JSON object of arguments
    keeps them as sent, so its block fails to parse as the model's malformed call would."""
    open_tag, close_tag = get_grammar("hermes").call or ("", "")
    blocks = []
    for call in tool_calls:
        f = call.get("function", call) if isinstance(call, Mapping) else {}
        f = f if isinstance(f, Mapping) else {}
        try:
            blocks.append(render_answer([ToolCall.from_dict(f)], "hermes"))
        except SchemaError:
            args = f.get("arguments")
            raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
            name = json.dumps(f.get("name"), ensure_ascii=False, default=str)
            blocks.append(f'{open_tag}\n{{"name": {name}, "arguments": {raw}}}\n{close_tag}')
    return "\n".join(blocks)


class _Attempt(Exception):
    """One attempt failed: `kind` to count by, `reason` in one line, whether another attempt may help,
    the server's ``Retry-After`` in seconds (None without one)."""

    def __init__(self, kind: str, reason: str, retry: bool = True, after: float | None = None) -> None:
        super().__init__(reason)
        self.kind, self.reason, self.retry, self.after = kind, reason, retry, after


def retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (a number or an HTTP date), at most
    `RETRY_AFTER_MAX`; None when absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX)


class OpenAIBackend:
    """Chat completions from an OpenAI-compatible server, several requests at once (module docstring).

    `prefix` uses vLLM's `continue_final_message` extension (the prefix is sent as a final assistant
    message and the server continues it). A server that returns fewer than n choices is asked again until
    n texts are collected. Reasoning returned separately by reasoning parsers (`reasoning_content` /
    `reasoning`) is put back in front as `<think>...</think>` when `reasoning_tag` is set.

    A request with `tools` sends them as the body's ``tools`` and its history in the chat-completions
    form (`openai_messages`); structured ``tool_calls`` in a reply (a server with a tool-call parser)
    come back as hermes ``<tool_call>`` blocks after the text (`hermes_text`), the form the ``native``
    template parses.
    """

    def __init__(
        self,
        base_url: str,
        model_name: str,
        concurrency: int = 8,
        retries: int = 4,
        timeout: float = 120.0,
        api_key: str | None = None,
        backoff: float = 1.0,
        reasoning_tag: str | None = "think",
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + ("" if base_url.rstrip("/").endswith("/chat/completions")
                                           else "/chat/completions")
        self.model_name, self.concurrency, self.retries = model_name, max(1, concurrency), max(0, retries)
        self.timeout, self.api_key, self.backoff = timeout, api_key, backoff
        self.reasoning_tag, self.extra_body = reasoning_tag, dict(extra_body or {})
        self.name = f"openai:{model_name}@{base_url}"
        self._rng = random.Random(0)
        self._lock = threading.Lock()

    def _payload(self, r: GenerationRequest, n: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model_name, "messages": list(r.messages), "n": n,
                                "temperature": r.temperature, "max_tokens": r.max_new_tokens}
        if r.seed is not None:
            body["seed"] = r.seed
        if r.tools:
            body.update(tools=list(r.tools), messages=openai_messages(r.messages))
        if r.prefix:
            body["messages"] = [*body["messages"], {"role": "assistant", "content": r.prefix}]
            body.update(continue_final_message=True, add_generation_prompt=False)
        body.update(self.extra_body)
        return body

    def _once(self, data: bytes, headers: dict[str, str]) -> list[str]:
        """One POST: the texts of its choices, or `_Attempt` saying why not."""
        req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        start = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                pieces, size = [], 0
                while piece := resp.read(_CHUNK):
                    size += len(piece)
                    if size > MAX_RESPONSE_BYTES:
                        raise _Attempt("too_large", f"response longer than {MAX_RESPONSE_BYTES} bytes")
                    if time.monotonic() - start > self.timeout:
                        raise _Attempt("timeout", f"no complete response within {self.timeout:g} s")
                    pieces.append(piece)
        except urllib.error.HTTPError as e:
            detail = (e.read(300) or b"").decode("utf-8", "replace").replace("\n", " ")
            status = f"HTTP {e.code}: {detail}".strip()
            if e.code in REFUSED_STATUS:
                raise EndpointUnavailable(f"{self.url} refuses the request: {status}") from None
            raise _Attempt(f"http_{e.code}", status, e.code in RETRY_STATUS,
                           retry_after(e.headers.get("Retry-After") if e.headers else None)) from None
        except _Attempt:
            raise
        except TimeoutError as e:
            raise _Attempt("timeout", f"no response within {self.timeout:g} s ({e})") from None
        except urllib.error.URLError as e:
            why = e.reason
            if isinstance(why, TimeoutError):
                raise _Attempt("timeout", f"no response within {self.timeout:g} s") from None
            down = isinstance(why, (ConnectionRefusedError, socket.gaierror))
            kind = "unreachable" if down else "connection"
            raise _Attempt(kind, f"{type(why).__name__}: {why}") from None
        except (ConnectionError, OSError, ValueError) as e:  # dropped mid-answer, a torn chunked body
            raise _Attempt("connection", f"{type(e).__name__}: {e}"[:300]) from None
        try:
            answer = json.loads(b"".join(pieces).decode("utf-8"))
        except (ValueError, RecursionError) as e:
            raise _Attempt("bad_json", f"response is not JSON ({str(e)[:120]})") from None
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
            raise _Attempt("bad_json", f"response has no choices: {str(answer)[:200]}")
        return [self._text(c) for c in choices]

    def _post(self, body: dict[str, Any], where: str, stop: threading.Event) -> list[str] | GenerationFailure:
        """The texts of one request's choices, sent again after failures that retrying can fix; a
        `GenerationFailure` once its attempts are spent (module docstring)."""
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        failed: _Attempt | None = None
        attempt = 0
        for attempt in range(self.retries + 1):
            if failed is not None:
                if failed.after is not None:
                    delay = failed.after
                else:
                    with self._lock:
                        jitter = self._rng.uniform(0, self.backoff)
                    delay = min(BACKOFF_MAX, self.backoff * 2 ** (attempt - 1)) + jitter
                if stop.wait(delay):
                    return GenerationFailure("stopped", f"{where}: stopped before attempt {attempt + 1}",
                                             attempt)
            try:
                return self._once(data, headers)
            except _Attempt as e:
                failed = e
            logger.warning("%s: attempt %d/%d failed: %s", where, attempt + 1, self.retries + 1,
                           failed.reason)
            if not failed.retry:
                break
        assert failed is not None
        if failed.kind == "unreachable":
            raise EndpointUnavailable(f"{where}: {self.url} failed after {attempt + 1} attempt(s): "
                                      f"{failed.reason}; is the server running?")
        return GenerationFailure(failed.kind, f"{where}: {self.url} failed after {attempt + 1} attempt(s): "
                                              f"{failed.reason}", attempt + 1)

    def _text(self, choice: Mapping[str, Any]) -> str:
        msg = choice.get("message")
        msg = msg if isinstance(msg, Mapping) else {}
        text = msg.get("content") or choice.get("text") or ""
        text = text if isinstance(text, str) else ""
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        calls = msg.get("tool_calls")
        if isinstance(calls, list) and calls:
            text = "\n".join(t for t in (text, hermes_text(calls)) if t)
        if isinstance(reasoning, str) and reasoning and self.reasoning_tag:
            text = f"<{self.reasoning_tag}>{reasoning}</{self.reasoning_tag}>\n{text}"
        return text

    def _one(self, r: GenerationRequest, where: str, stop: threading.Event) -> list[str] | GenerationFailure:
        texts: list[str] = []
        for _ in range(r.n):  # at most n round trips even if each returns a single choice
            got = self._post(self._payload(r, r.n - len(texts)), where, stop)
            if isinstance(got, GenerationFailure):
                return got
            texts.extend(got)
            if len(texts) >= r.n:
                break
        return texts[: r.n]

    def stream(self, requests: list[GenerationRequest]
               ) -> Iterator[tuple[int, list[str] | GenerationFailure]]:
        """(index, texts or `GenerationFailure`) of every request, in the order the answers arrive; at most
        `concurrency` requests in flight and twice that queued. `EndpointUnavailable` stops the stream;
        so does closing it (the requests in flight end after their current attempt)."""
        if not requests:
            return
        stop = threading.Event()
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="tooltune-endpoint")
        pending: dict[Future, int] = {}
        queued = 0
        try:
            while queued < len(requests) or pending:
                while queued < len(requests) and len(pending) < 2 * self.concurrency:
                    r = requests[queued]
                    where = f"request {r.id if r.id is not None else queued}"
                    pending[pool.submit(self._one, r, where, stop)] = queued
                    queued += 1
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield pending.pop(future), future.result()
        finally:
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)

    def generate_each(self, requests: list[GenerationRequest]) -> list[list[str] | GenerationFailure]:
        """The texts of every request in order, a `GenerationFailure` in place of one that failed for good."""
        out: list[list[str] | GenerationFailure] = [[] for _ in requests]
        for i, got in self.stream(requests):
            out[i] = got
        return out

    def generate(self, requests: list[GenerationRequest]) -> list[list[str]]:
        out: list[list[str]] = []
        for got in self.generate_each(requests):
            if isinstance(got, GenerationFailure):
                raise BackendError(got.reason)
            out.append(got)
        return out
