"""What every backend speaks: the request, the interface, the errors, and a request that failed for good.

`Backend.generate(requests) -> list[list[str]]` (n texts per request) raises when any request fails:
the contract of training and data selection, where a missing completion is a bug to stop on. An
evaluation goes on past one entry that cannot be generated; it asks through `stream_results`, which
yields each request's texts as they arrive, or a `GenerationFailure` in their place for a request that
failed for good (an endpoint's retries spent on it, a status that retrying cannot fix, a local model's
prompt longer than its context), and raises only for what stops every request (`EndpointUnavailable`:
nothing accepts the connection, the endpoint refuses the key or does not know the model). A backend
takes part by offering `stream(requests)` (the endpoint: answers in the order they arrive) or
`generate_each(requests)` (the local model: one batch, a failure per request); any other backend is
asked chunk by chunk through `generate` and its errors stay the run's. `Tolerant` is the same for
multi-turn episodes: a backend whose failed requests answer "" (the episode's turn ends) and are listed
by request id, every later request of a failed id answered "" without asking again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class GenerationRequest:
    """One prompt to complete.

    `id` and `meta` do not change what a model sees; they let the replay and scripted backends find
    the answer for this request (`meta` keys "turn" and "step" address one step of a multi-turn entry).
    `tools` are OpenAI-style function schemas for the chat template (``apply_chat_template(tools=…)``),
    set under a template whose tools are not in the messages (``native``,
    `tooltune.prompts.prompt_tools`); the replay and scripted backends ignore them.
    `stop_when(text)` is True when the completion so far (`text`) already decides what the caller reads
    from it (an evaluation whose verdict no continuation can change): a backend that can stop a
    completion early (the local model) returns that text, a prefix of the full completion; the others
    ignore it.
    """

    messages: list[dict]
    n: int = 1
    temperature: float = 0.0
    max_new_tokens: int = 512
    prefix: str = ""
    seed: int | None = None
    id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    tools: list[dict] | None = None
    stop_when: Callable[[str], bool] | None = None


@runtime_checkable
class Backend(Protocol):
    name: str

    def generate(self, requests: list[GenerationRequest]) -> list[list[str]]: ...


class BackendError(RuntimeError):
    """A backend could not produce completions; the message names the request and the cause."""


class MissingPrediction(BackendError, KeyError):
    """The predictions file has no result for the requested id (or turn/step)."""


class EndpointUnavailable(BackendError):
    """The endpoint cannot answer any request (nothing accepts the connection, or it refuses the key or
    the model): the run stops; nothing is recorded for the requests not answered."""


@dataclass(frozen=True)
class GenerationFailure:
    """A request that failed for good: `kind` is a short label to count by (``http_500``, ``timeout``,
    ``bad_json``, ``connection``, ``too_long``, ``error``), `reason` one line naming the cause, `attempts`
    the requests sent for it."""

    kind: str
    reason: str
    attempts: int = 1


Result = list[str] | GenerationFailure
"""What `stream_results` gives for one request: its n texts, or why it failed for good."""


def settle(backend: Backend, requests: Sequence[GenerationRequest]) -> list[Result]:
    """`backend`'s texts for `requests`, a `GenerationFailure` in place of a request that failed for good
    when the backend tells failures apart (`generate_each`); otherwise `generate`, whose errors raise."""
    each = getattr(backend, "generate_each", None)
    if callable(each):
        return list(each(list(requests)))
    return list(backend.generate(list(requests)))


def stream_results(backend: Backend, requests: Sequence[GenerationRequest],
                   chunk_size: int = 0) -> Iterator[tuple[int, Result]]:
    """(index into `requests`, its result) for every request, each as soon as the backend has it: a
    backend with `stream` yields in the order answers arrive (its own concurrency bounds the requests in
    flight), any other is asked `chunk_size` requests at a time (0 = all at once) through `settle`."""
    stream = getattr(backend, "stream", None)
    if callable(stream):
        yield from stream(list(requests))
        return
    size = chunk_size if chunk_size > 0 else max(1, len(requests))
    for start in range(0, len(requests), size):
        got = settle(backend, requests[start : start + size])
        yield from ((start + j, r) for j, r in enumerate(got))


class Tolerant:
    """`backend` for multi-turn episodes, where one request failing must not end the others: a request
    that fails for good answers "" (no call: the episode's turn ends) and its id goes to `failures`;
    later requests of that id answer "" without reaching the backend. Other attributes are the
    backend's."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.name = backend.name
        self.failures: dict[str, GenerationFailure] = {}

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.backend, attr)

    def generate(self, requests: list[GenerationRequest]) -> list[list[str]]:
        out: list[list[str]] = [[""] * r.n for r in requests]
        ask = [i for i, r in enumerate(requests) if r.id is None or str(r.id) not in self.failures]
        for i, got in zip(ask, settle(self.backend, [requests[i] for i in ask]), strict=True):
            if isinstance(got, GenerationFailure):
                if requests[i].id is not None:
                    self.failures.setdefault(str(requests[i].id), got)
            else:
                out[i] = got
        return out
