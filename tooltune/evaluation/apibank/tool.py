"""The base of the API-Bank tool re-implementations and the helpers their checks share.

Each tool mirrors one class of AlibabaResearch/DAMO-ConvAI `api-bank/apis/` (commit 483554e): the same
initial database, the same state changes, the same result dictionary
`{"api_name", "input", "output", "exception"}` (a few official tools leave out `api_name`, and so do ours) and
the same `check(response, truth)` as the official `check_api_call_correctness`, bugs included. Errors inside
a call become the result's `exception` text, as officially; the errors the official code lets escape (a
check reading a missing key, a string method on a list) escape here too and the scorer classifies them the
way the official evaluator's loop does.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable, Mapping
from typing import Any, ClassVar


class Unscorable(BaseException):
    """A result the official code would compute online (a web service, an embedding model) and that the
    recorded answers do not hold, or a computation the official code never finishes. Derives from
    BaseException so that no tool's `except Exception` turns it into a result."""


class Tool:
    """One API-Bank tool: `call(**arguments) -> result` and `check(response, truth) -> bool`."""

    name: ClassVar[str] = ""
    database_name: ClassVar[str | None] = None
    with_api_name: ClassVar[bool] = True

    def __init__(self, database: Any = None, token_checker: Any = None,
                 rng: random.Random | None = None, recorded: Mapping[str, Any] | None = None) -> None:
        self.database = database if database is not None else {}
        self.token_checker = token_checker
        self.rng = rng or random.Random(0)
        self.recorded = recorded or {}

    def respond(self, inputs: Any, action: Callable[[], Any]) -> dict[str, Any]:
        """The official result dictionary of `action()`: its value, or the text of its exception."""
        try:
            output, exception = action(), None
        except Exception as e:
            output, exception = None, str(e)
        result: dict[str, Any] = {"api_name": self.name} if self.with_api_name else {}
        result.update(input=inputs, output=output, exception=exception)
        return result

    def username(self, token: Any) -> str:
        return self.token_checker.check_token(token)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return same_result(response, truth)


def same_result(response: Mapping[str, Any], truth: Mapping[str, Any]) -> bool:
    """The most common official check: input, output and exception all equal."""
    return (response["input"] == truth["input"] and response["output"] == truth["output"]
            and response["exception"] == truth["exception"])


def same_outcome(response: Mapping[str, Any], truth: Mapping[str, Any]) -> bool:
    return response["output"] == truth["output"] and response["exception"] == truth["exception"]


def words_overlap(a: Any, b: Any, lower: bool = False) -> bool:
    """The official content rule: the sets of space-separated words overlap by more than half (Jaccard)."""
    if lower:
        a, b = a.lower(), b.lower()
    x, y = set(a.split(" ")), set(b.split(" "))
    return len(x & y) / len(x | y) > 0.5


def strptime(text: Any, fmt: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, fmt)


def pad_year(text: Any) -> str:
    """Strip; left-pad a short year of a three-part `Y-m-d...` text with zeros (official format checks)."""
    text = text.strip()
    parts = text.split("-")
    if len(parts) == 3 and len(parts[0]) != 4:
        parts[0] = parts[0].zfill(4)
        text = "-".join(parts)
    return text


def normal_time(text: Any, fmt: str) -> Any:
    """`pad_year`, then parse and re-format with `fmt`; the exception itself when it does not parse (two
    exceptions never compare equal, so a check comparing them fails, as officially)."""
    text = pad_year(text)
    try:
        return strptime(text, fmt).strftime(fmt)
    except Exception as e:
        return e


def next_id(database: Mapping[Any, Any]) -> int:
    """The id the official meeting and reminder tools give a new record: one more than the largest."""
    return max(int(i) for i in database) + 1 if database else 0
