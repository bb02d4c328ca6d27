"""The quickstart task's catalog: values, tools (look-alike pairs, enum paraphrases), multi-step chains.

Values are copy-cheap (one token per city or person name, integers as digits); the decisions are in
the tool choice, the enum paraphrases and the number of calls (see `tooltune.data.synthetic.quickstart_task`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tooltune.schema import ToolSpec

CITIES = (
    "Paris",
    "Rome",
    "Oslo",
    "Lima",
    "Cairo",
    "Tokyo",
    "Delhi",
    "Dubai",
    "Berlin",
    "Madrid",
    "Vienna",
    "Prague",
    "Seoul",
    "Sydney",
    "Boston",
    "Denver",
)
PEOPLE = ("Anna", "Ben", "Carl", "Dana", "Eva", "Finn", "Gina", "Hugo", "Ivy", "Jack", "Kate", "Leo")


@dataclass(frozen=True)
class EnumParam:
    """An enum argument: values, explicit phrasings and paraphrases per value (value 0 is the default)."""

    name: str
    explicit: dict[str, tuple[str, ...]]
    paraphrase: dict[str, tuple[str, ...]]

    @property
    def values(self) -> list[str]:
        return list(self.explicit)


@dataclass(frozen=True)
class ToolDocs:
    """Realistic documentation of a tool, as BFCL and ACEBench list tools: what it does, what each
    parameter means, and optional parameters (never needed by a request: a call leaves them out)."""

    description: str
    params: dict[str, str]  # required parameter (slot or enum) -> its description
    optional: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> JSON schema with description


@dataclass(frozen=True)
class Tool:
    """A tool of the task: its spec fields, slot kinds and request phrasings."""

    name: str
    description: str
    slots: dict[str, str]  # argument -> "city" | "person" | "int:LO:HI" | "origin" | "destination"
    templates: tuple[str, ...]  # use {slot} names and {enum} for the enum phrase
    enum: EnumParam | None = None
    parallel_slot: str | None = None  # slot that may name two values -> two parallel calls
    lookalike: str | None = None
    docs: ToolDocs | None = None  # None: names and types only (the default profile)

    def spec(self) -> ToolSpec:
        props: dict[str, Any] = {}
        for arg, kind in self.slots.items():
            props[arg] = {"type": "integer" if kind.startswith("int") else "string"}
        if self.enum:
            props[self.enum.name] = {"type": "string", "enum": self.enum.values}
        if self.docs is None:
            # no description: the name says it all and every prompt token costs time on 2 CPU cores
            return ToolSpec(self.name, "", {"type": "object", "properties": props, "required": list(props)})
        required = list(props)
        for arg in required:
            props[arg] = {**props[arg], "description": self.docs.params[arg]}
        props.update(self.docs.optional)
        schema = {"type": "object", "properties": props, "required": required}
        return ToolSpec(self.name, self.docs.description, schema)


_UNIT = EnumParam(
    "unit",
    {"celsius": ("in celsius",), "fahrenheit": ("in fahrenheit",)},
    {"celsius": ("in metric units",), "fahrenheit": ("in imperial units", "the American way")},
)
_MEAL = EnumParam(
    "meal",
    {"lunch": ("for lunch",), "dinner": ("for dinner",)},
    {"lunch": ("at noon",), "dinner": ("tonight", "in the evening")},
)
_CABIN = EnumParam(
    "cabin",
    {"economy": ("in economy",), "business": ("in business class",)},
    {"economy": ("as cheap as possible",), "business": ("with a lie-flat seat", "in comfort")},
)
_PRIORITY = EnumParam(
    "priority",
    {"normal": ("with normal priority",), "high": ("with high priority",)},
    {"normal": ("when convenient",), "high": ("urgently", "right away")},
)
_PERIOD = EnumParam(
    "period",
    {"am": ("am",), "pm": ("pm",)},
    {"am": ("in the morning",), "pm": ("in the evening", "at night")},
)
_GENRE = EnumParam(
    "genre",
    {"pop": ("pop",), "jazz": ("jazz",), "rock": ("rock",)},
    {"pop": ("chart hits",), "jazz": ("swing", "bebop"), "rock": ("guitar anthems", "punk")},
)
_TOPIC = EnumParam(
    "topic",
    {"world": ("world",), "sports": ("sports",), "science": ("science",)},
    {"world": ("global",), "sports": ("football", "tennis"), "science": ("space", "physics")},
)

TRAIN_TOOLS: tuple[Tool, ...] = (
    Tool(
        "get_weather",
        "Current weather in a city",
        {"city": "city"},
        (
            "What is the weather in {city} {enum}?",
            "How warm is it in {city} now, {enum}?",
            "Current weather for {city} {enum}, please.",
        ),
        _UNIT,
        "city",
        "get_forecast",
    ),
    Tool(
        "get_forecast",
        "Weather forecast for the next days",
        {"city": "city", "days": "int:2:9"},
        (
            "Forecast for {city} for the next {days} days.",
            "Will it rain in {city} in the next {days} days?",
            "Give me the {days} day forecast for {city}.",
        ),
        None,
        "city",
        "get_weather",
    ),
    Tool(
        "book_hotel",
        "Book a hotel room",
        {"city": "city", "nights": "int:1:9"},
        (
            "Book a hotel in {city} for {nights} nights.",
            "I need a room in {city} for {nights} nights.",
            "Find me a hotel room in {city}, {nights} nights.",
        ),
        None,
        None,
        "book_table",
    ),
    Tool(
        "book_table",
        "Reserve a restaurant table",
        {"city": "city", "people": "int:2:9"},
        (
            "Reserve a table in {city} for {people} people {enum}.",
            "Book a restaurant in {city} {enum}, {people} of us.",
            "Table for {people} in {city} {enum}.",
        ),
        _MEAL,
        None,
        "book_hotel",
    ),
    Tool(
        "search_flights",
        "Search flights between two cities",
        {"origin": "city", "destination": "city"},
        (
            "Find flights from {origin} to {destination} {enum}.",
            "Fly me to {destination} from {origin} {enum}.",
            "I want to fly from {origin} to {destination} {enum}.",
        ),
        _CABIN,
        None,
        "search_trains",
    ),
    Tool(
        "search_trains",
        "Search trains between two cities",
        {"origin": "city", "destination": "city"},
        (
            "Find trains from {origin} to {destination}.",
            "Take the train to {destination} from {origin}.",
            "Rail tickets from {origin} to {destination}.",
        ),
        None,
        None,
        "search_flights",
    ),
    Tool(
        "send_email",
        "Send an email",
        {"to": "person"},
        ("Email {to} {enum}.", "Send an email to {to} {enum}.", "Write {to} a mail {enum}."),
        _PRIORITY,
        "to",
        "send_message",
    ),
    Tool(
        "send_message",
        "Send a text message",
        {"to": "person"},
        ("Text {to}.", "Send a message to {to}.", "Ping {to} on chat."),
        None,
        "to",
        "send_email",
    ),
    Tool(
        "set_alarm",
        "Set an alarm clock",
        {"hour": "int:1:12"},
        ("Wake me at {hour} {enum}.", "Set an alarm for {hour} {enum}.", "Alarm at {hour} {enum} please."),
        _PERIOD,
        None,
        "set_timer",
    ),
    Tool(
        "set_timer",
        "Start a countdown timer",
        {"minutes": "int:1:60"},
        ("Set a timer for {minutes} minutes.", "Count down {minutes} minutes.", "Timer, {minutes} minutes."),
        None,
        None,
        "set_alarm",
    ),
    Tool(
        "get_news",
        "Latest news headlines",
        {},
        ("Latest {enum} news.", "What is new in {enum}?", "Headlines about {enum}."),
        _TOPIC,
        None,
        "play_music",
    ),
    Tool(
        "play_music",
        "Play music of a genre",
        {},
        ("Play some {enum}.", "Put on {enum} music.", "I want to hear {enum}."),
        _GENRE,
        None,
        "get_news",
    ),
)

# Tools never offered in training: the second held-out split measures generalization to new tools.
# Each is a new combination of pieces the training tools are made of, so that the split measures
# composition rather than vocabulary: the name joins a verb and a noun of two different training
# names (`book_` + `_flights`, each one token of the task's tokenizer), the parameters and their
# value kinds are those of training tools, and the requests use the words of the training requests
# ("Book a hotel", "Find flights"). Look-alikes pair unseen tools with each other, never with a
# training tool, so the decision is which offered new tool the request means.
UNSEEN_TOOLS: tuple[Tool, ...] = (
    Tool(
        "book_flights",
        "Book a flight between two cities",
        {"origin": "city", "destination": "city"},
        (
            "Book flights from {origin} to {destination}.",
            "Book a flight to {destination} from {origin}.",
            "Book me a flight from {origin} to {destination}.",
        ),
        None,
        None,
        "book_trains",
    ),
    Tool(
        "book_trains",
        "Book a train between two cities",
        {"origin": "city", "destination": "city"},
        (
            "Book a train from {origin} to {destination}.",
            "Book train tickets to {destination} from {origin}.",
            "Book me a train from {origin} to {destination}.",
        ),
        None,
        None,
        "book_flights",
    ),
    Tool(
        "search_hotel",
        "Search hotel rooms in a city",
        {"city": "city", "nights": "int:1:9"},
        (
            "Search hotels in {city} for {nights} nights.",
            "Search for a hotel room in {city}, {nights} nights.",
            "Search a hotel in {city} for {nights} nights.",
        ),
        None,
        "city",
        "search_music",
    ),
    Tool(
        "search_music",
        "Search songs of a genre",
        {},
        ("Search for {enum} music.", "Search {enum} songs.", "Search the music library for {enum}."),
        _GENRE,
        None,
        "search_hotel",
    ),
    Tool(
        "send_forecast",
        "Send a contact the weather forecast of a city",
        {"to": "person", "city": "city"},
        (
            "Send {to} the forecast for {city}.",
            "Send the {city} forecast to {to}.",
            "Send {to} the weather forecast for {city}.",
        ),
        None,
        "to",
        "play_news",
    ),
    Tool(
        "play_news",
        "Play news headlines aloud",
        {},
        ("Play the {enum} news.", "Play me the latest {enum} news.", "Play {enum} headlines."),
        _TOPIC,
        None,
        "send_forecast",
    ),
)


CHAINS: tuple[tuple[str, str, str, str, str], ...] = (
    # (first tool, result field, result kind, follow-up phrase, second tool's argument taking it)
    ("search_flights", "agent", "person", "then email the travel agent {enum}", "send_email:to"),
    ("book_hotel", "manager", "person", "then text the hotel manager", "send_message:to"),
    (
        "get_weather",
        "warmest_nearby",
        "city",
        "then book a hotel in the warmest nearby city for {nights} nights",
        "book_hotel:city",
    ),
    (
        "search_trains",
        "next_stop",
        "city",
        "then get the forecast for the next stop for {days} days",
        "get_forecast:city",
    ),
)


# Frequent multi-character pieces of the rendered tool schemas and calls, kept as single tokens by the
# tiny model's tokenizer: prompts shrink by about half and answers by a third, and on 2 CPU cores
# every token is time (SFT cost grows with prompt length, rollout cost with answer length).
FORMAT_TOKENS: tuple[str, ...] = (
    '{"name": "',
    '", "description": "", "parameters": {"type": "object", "properties": {',
    '{"type": "string"}',
    '{"type": "integer"}',
    '{"type": "string", "enum": [',
    '"required": [',
    '", "arguments": {',
    '[{"name": "',
    '"}}',
    "}}]",
    '"}}]',
    "}}, ",
    '"}}, ',
    '"]}}',
    ': "',
    '", "',
)


def entity_tokens() -> tuple[str, ...]:
    """City and person names: one token each, so copying a value is one decision."""
    return CITIES + PEOPLE
