"""Realistic tool documentation for the quickstart task (`TaskConfig.docs: schema`).

Every tool of the catalog gets what a BFCL or ACEBench prompt lists for it: a one-sentence description,
a description of each parameter, enums, the required list and optional parameters that no request
needs. `DISTRACTORS` are documented tools that are offered but never requested; each resembles a
requested tool (air quality beside the weather, cancelling beside booking, a voice note beside a text
message), so offering 5-20 tools per prompt adds look-alike decisions, not only tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tooltune.data.synthetic.quickstart_catalog import TRAIN_TOOLS, UNSEEN_TOOLS, Tool, ToolDocs


def _opt(kind: str, description: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, **extra, "description": description}


DOCS: dict[str, ToolDocs] = {
    "get_weather": ToolDocs(
        "Get the current weather conditions in a city.",
        {"city": "Name of the city.", "unit": "Temperature unit."},
        {"include_wind": _opt("boolean", "Also report the wind speed.")},
    ),
    "get_forecast": ToolDocs(
        "Get the daily weather forecast for a city.",
        {"city": "Name of the city.", "days": "Number of days to forecast."},
    ),
    "book_hotel": ToolDocs(
        "Book a hotel room in a city.",
        {"city": "City of the hotel.", "nights": "Number of nights to stay."},
        {"breakfast": _opt("boolean", "Add breakfast to the booking.")},
    ),
    "book_table": ToolDocs(
        "Reserve a table at a restaurant.",
        {"city": "City of the restaurant.", "people": "Number of guests.", "meal": "Which meal."},
    ),
    "search_flights": ToolDocs(
        "Search flights between two cities.",
        {"origin": "Departure city.", "destination": "Arrival city.", "cabin": "Cabin class."},
        {"max_stops": _opt("integer", "Maximum number of stops.")},
    ),
    "search_trains": ToolDocs(
        "Search train connections between two cities.",
        {"origin": "Departure city.", "destination": "Arrival city."},
    ),
    "send_email": ToolDocs(
        "Send an email to a contact.",
        {"to": "Name of the contact.", "priority": "Priority of the email."},
        {"subject": _opt("string", "Subject line.")},
    ),
    "send_message": ToolDocs(
        "Send a text message to a contact.",
        {"to": "Name of the contact."},
    ),
    "set_alarm": ToolDocs(
        "Set an alarm at an hour of the day.",
        {"hour": "Hour on a 12-hour clock.", "period": "Morning or afternoon."},
        {"label": _opt("string", "Text shown with the alarm.")},
    ),
    "set_timer": ToolDocs(
        "Start a countdown timer.",
        {"minutes": "Length of the timer in minutes."},
    ),
    "get_news": ToolDocs(
        "Get the latest news headlines on a topic.",
        {"topic": "News topic."},
        {"limit": _opt("integer", "Maximum number of headlines.")},
    ),
    "play_music": ToolDocs(
        "Play music of a genre.",
        {"genre": "Music genre."},
    ),
    "book_flights": ToolDocs(
        "Book a seat on a flight between two cities.",
        {"origin": "City the flight leaves from.", "destination": "City the flight goes to."},
        {"seat": _opt("string", "Seat preference.", enum=["aisle", "window"])},
    ),
    "book_trains": ToolDocs(
        "Book a seat on a train between two cities.",
        {"origin": "City the train leaves from.", "destination": "City the train goes to."},
    ),
    "search_hotel": ToolDocs(
        "Search available hotel rooms in a city, without booking.",
        {"city": "City to search.", "nights": "Length of the stay in nights."},
        {"max_price": _opt("integer", "Highest price per night.")},
    ),
    "search_music": ToolDocs("Search the music library for songs of a genre.", {"genre": "Genre to search."}),
    "send_forecast": ToolDocs(
        "Send a contact the weather forecast for a city.",
        {"to": "Contact who receives the forecast.", "city": "City of the forecast."},
    ),
    "play_news": ToolDocs("Read the latest headlines on a topic aloud.", {"topic": "News topic."}),
}
"""Documentation of every requested tool (train and unseen)."""

_NONE: tuple[str, ...] = ()

DISTRACTORS: tuple[Tool, ...] = (
    Tool("get_air_quality", "", {"city": "city"}, _NONE, docs=ToolDocs(
        "Get the air quality index in a city.", {"city": "Name of the city."},
        {"pollutant": _opt("string", "Pollutant to report.", enum=["pm25", "ozone"])})),
    Tool("get_uv_index", "", {"city": "city"}, _NONE, docs=ToolDocs(
        "Get the current UV index in a city.", {"city": "Name of the city."})),
    Tool("get_pollen_forecast", "", {"city": "city", "days": "int:2:9"}, _NONE, docs=ToolDocs(
        "Get the pollen forecast for a city.", {"city": "Name of the city.", "days": "Number of days."})),
    Tool("cancel_hotel", "", {"booking": "int:1:9"}, _NONE, docs=ToolDocs(
        "Cancel a hotel booking.", {"booking": "Booking number."})),
    Tool("book_apartment", "", {"city": "city", "nights": "int:1:9"}, _NONE, docs=ToolDocs(
        "Book a holiday apartment in a city.",
        {"city": "City of the apartment.", "nights": "Number of nights."})),
    Tool("find_restaurants", "", {"city": "city"}, _NONE, docs=ToolDocs(
        "List restaurants in a city.", {"city": "Name of the city."},
        {"cuisine": _opt("string", "Type of food.", enum=["italian", "thai", "local"])})),
    Tool("track_flight", "", {"number": "int:100:999"}, _NONE, docs=ToolDocs(
        "Get the status of a flight.", {"number": "Flight number."})),
    Tool("search_buses", "", {"origin": "city", "destination": "city"}, _NONE, docs=ToolDocs(
        "Search bus connections between two cities.",
        {"origin": "Departure city.", "destination": "Arrival city."})),
    Tool("read_email", "", {}, _NONE, docs=ToolDocs(
        "Read the newest emails of a folder.", {},
        {"folder": _opt("string", "Mail folder.", enum=["inbox", "sent"])})),
    Tool("send_voice_note", "", {"to": "person"}, _NONE, docs=ToolDocs(
        "Send a recorded voice note to a contact.", {"to": "Name of the contact."})),
    Tool("cancel_alarm", "", {"hour": "int:1:12"}, _NONE, docs=ToolDocs(
        "Cancel the alarm set for an hour.", {"hour": "Hour of the alarm."})),
    Tool("set_reminder", "", {"minutes": "int:1:60"}, _NONE, docs=ToolDocs(
        "Remind the user after some minutes.", {"minutes": "Minutes from now."},
        {"note": _opt("string", "Text of the reminder.")})),
    Tool("get_podcasts", "", {}, _NONE, docs=ToolDocs(
        "List new podcast episodes.", {},
        {"topic": _opt("string", "Podcast topic.", enum=["world", "sports", "science"])})),
    Tool("play_radio", "", {}, _NONE, docs=ToolDocs(
        "Play a live radio station.", {},
        {"genre": _opt("string", "Station genre.", enum=["pop", "jazz", "rock"])})),
    Tool("pause_music", "", {}, _NONE, docs=ToolDocs("Pause the music that is playing.", {})),
    Tool("get_directions", "", {"origin": "city", "destination": "city"}, _NONE, docs=ToolDocs(
        "Get driving directions between two cities.", {"origin": "Start city.", "destination": "End city."})),
)
"""Documented tools that are offered but never requested, each a look-alike of a requested tool."""


def documented(tools: tuple[Tool, ...]) -> tuple[Tool, ...]:
    """`tools` with their documentation attached (their specs then carry descriptions)."""
    return tuple(dataclasses.replace(t, docs=DOCS[t.name]) for t in tools)


DOCUMENTED_TRAIN_TOOLS = documented(TRAIN_TOOLS)
DOCUMENTED_UNSEEN_TOOLS = documented(UNSEEN_TOOLS)
