"""A small, self-contained, seeded text corpus for training the tiny model's tokenizer.

The tokenizer only needs to see the kind of text it will encode: JSON tool schemas inside `<tools>`,
user requests, `<think>`/`<tool_call>` (Tool-N1) and `<reason>`/`<tool>` (R2IF) answers, Python-call
lists and ChatML framing. Callers with real data (the synthetic generator, a training set) pass their
own corpus to `build_tiny_model(corpus=...)`; this one keeps the builder usable with nothing else.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from tooltune.parsing import GRAMMARS

_TOOL_N1, _R2IF = GRAMMARS["tool_n1"], GRAMMARS["r2if"]

_TOOLS = [
    ("get_weather", "Get the current weather for a city.",
     {"city": ("string", "City name, e.g. Paris"), "unit": ("string", "celsius or fahrenheit")}),
    ("get_forecast", "Get the weather forecast for the next days.",
     {"city": ("string", "City name"), "days": ("integer", "Number of days, 1-14")}),
    ("book_hotel", "Book a hotel room.",
     {"city": ("string", "City"), "nights": ("integer", "Number of nights"),
      "guests": ("integer", "Number of guests")}),
    ("search_flights", "Search flights between two airports.",
     {"origin": ("string", "Departure city"), "destination": ("string", "Arrival city"),
      "date": ("string", "Date as YYYY-MM-DD")}),
    ("send_email", "Send an email message.",
     {"to": ("string", "Recipient address"), "subject": ("string", "Subject line"),
      "body": ("string", "Message text")}),
    ("set_alarm", "Set an alarm.", {"hour": ("integer", "Hour 0-23"), "minute": ("integer", "Minute 0-59")}),
    ("convert_currency", "Convert an amount between currencies.",
     {"amount": ("number", "Amount"), "from_currency": ("string", "ISO code"),
      "to_currency": ("string", "ISO code")}),
    ("math.factorial", "Compute the factorial of a number.", {"n": ("integer", "A non-negative integer")}),
]
_CITIES = ["Paris", "Berlin", "Tokyo", "Lima", "Oslo", "Cairo", "Denver", "Madrid", "Seoul", "Austin"]
_PEOPLE = ["alice@example.com", "bob@example.org", "chen@mail.net", "dana@corp.io"]
_CURRENCIES = ["USD", "EUR", "JPY", "GBP", "CHF"]


def _schema(name: str, desc: str, params: dict) -> dict:
    return {
        "name": name,
        "description": desc,
        "parameters": {
            "type": "object",
            "properties": {k: {"type": t, "description": d} for k, (t, d) in params.items()},
            "required": list(params),
        },
    }


def _value(rng: random.Random, param: str, typ: str) -> object:
    if param in ("city", "origin", "destination"):
        return rng.choice(_CITIES)
    if param == "to":
        return rng.choice(_PEOPLE)
    if param.endswith("currency"):
        return rng.choice(_CURRENCIES)
    if param == "unit":
        return rng.choice(["celsius", "fahrenheit"])
    if param == "date":
        return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if typ == "integer":
        return rng.randint(0, 60)
    if typ == "number":
        return round(rng.uniform(1, 500), 2)
    return rng.choice(["Hello", "Meeting at noon", "Quarterly report", "See you soon"])


def _python_call(name: str, args: dict) -> str:
    return f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


def example_texts(n: int = 400, seed: int = 0) -> Iterator[str]:
    """Yield `n` rendered examples (ChatML prompt + answer in one of the project's call syntaxes)."""
    rng = random.Random(seed)
    for i in range(n):
        offered = rng.sample(_TOOLS, k=rng.randint(1, 3))
        tools_json = json.dumps([_schema(*t) for t in offered])
        calls = []
        for name, _desc, params in offered[: rng.randint(0, len(offered))]:
            calls.append({"name": name, "arguments": {k: _value(rng, k, t) for k, (t, _) in params.items()}})
        request = " and ".join(
            f"{c['name'].replace('_', ' ')} with " + ", ".join(f"{k} {v}" for k, v in c["arguments"].items())
            for c in calls
        ) or "tell me a joke about the sea"
        answer_json = json.dumps(calls)
        style = i % 3
        if style == 0:
            (r0, r1), (c0, c1) = _TOOL_N1.reasoning, _TOOL_N1.call
            answer = f"{r0}The user wants to {request}.{r1}\n{c0}{answer_json}{c1}"
        elif style == 1:
            steps = " ".join(f"#{c['name']}#" for c in calls) or "no function fits"
            params = "\n".join(f"- {k}: {v}" for c in calls for k, v in c["arguments"].items())
            (r0, r1), (c0, c1) = _R2IF.reasoning, _R2IF.call
            answer = f"{r0}Step1 {steps}. Step2\n{params}{r1}{c0}{answer_json}{c1}"
        else:
            answer = "[" + ", ".join(_python_call(c["name"], c["arguments"]) for c in calls) + "]"
        yield (
            f"<|im_start|>system\nYou may call functions.\n<tools>{tools_json}</tools><|im_end|>\n"
            f"<|im_start|>user\nPlease {request}.<|im_end|>\n"
            f"<|im_start|>assistant\n{answer}<|im_end|>\n"
        )
        if calls and i % 4 == 0:  # a tool result turn, as in multi-step histories
            result = json.dumps({"result": _value(rng, "x", "number"), "ok": True})
            yield f"<|im_start|>tool\n{result}<|im_end|>\n"
