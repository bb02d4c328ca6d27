"""The synthetic generator's tool catalog: realistic tools covering every JSON-Schema parameter type.

Each tool lists its parameters (kind, schema, required or optional with a default, and the clause a
user adds to ask for an optional one) and verb-phrase intents with slots for the required ones.
Tools in the same `group` are look-alikes (weather now / forecast, flights / trains, order status /
package tracking) offered as distractors. `CHAINS` are two-step tasks where the second call needs a
value from the first call's result (multi_step samples).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tooltune.data.synthetic import values as v


@dataclass(frozen=True)
class Param:
    name: str
    kind: v.Kind
    schema: dict[str, Any]
    required: bool = True
    default: Any = None
    clauses: tuple[str, ...] = ("with {name} {v}",)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: tuple[Param, ...]
    intents: tuple[str, ...]
    group: str
    result: Callable[[dict[str, Any], random.Random], Any] | None = None
    schema: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        props = {}
        for p in self.params:
            s = dict(p.schema)
            if not p.required:
                s["default"] = p.default
            props[p.name] = s
        object.__setattr__(
            self,
            "schema",
            {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": props,
                    "required": [p.name for p in self.params if p.required],
                },
            },
        )


def s(t: str, desc: str, **kw: Any) -> dict[str, Any]:
    return {"type": t, "description": desc, **kw}


def e(kind: v.Kind, desc: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(kind.enum), "description": desc}  # type: ignore[attr-defined]


CITY_STATE = s("string", "City and state abbreviation, e.g. 'San Francisco, CA'")
ISO_DATE = s("string", "Date in YYYY-MM-DD format", format="date")
HHMM = s("string", "24-hour time as HH:MM")
UNIT = Param("unit", v.UNIT_TEMP, e(v.UNIT_TEMP, "Temperature unit"), False, "celsius", ("{v}",))


def _rid(prefix: str, rng: random.Random) -> str:
    return f"{prefix}{rng.randint(1000, 9999)}"


TOOLS: tuple[Tool, ...] = (
    Tool(
        "get_current_weather",
        "Get the current weather conditions for a US city.",
        (Param("location", v.city_state, CITY_STATE), UNIT),
        (
            "check the weather in {location}",
            "tell me how the weather is right now in {location}",
            "get the current conditions for {location}",
        ),
        "weather",
        lambda a, r: {"temperature": r.randint(-5, 35), "conditions": r.choice(["sunny", "cloudy", "rain"])},
    ),
    Tool(
        "get_weather_forecast",
        "Get a multi-day weather forecast for a US city.",
        (
            Param("location", v.city_state, CITY_STATE),
            Param("days", v.small_int, s("integer", "Number of days to forecast (1-12)")),
            UNIT,
        ),
        (
            "get a {days}-day forecast for {location}",
            "tell me the weather for the next {days} days in {location}",
        ),
        "weather",
    ),
    Tool(
        "find_restaurants",
        "Search restaurants in a US city by cuisine.",
        (
            Param("city", v.city_state, CITY_STATE),
            Param("cuisine", v.CUISINE, e(v.CUISINE, "Cuisine type")),
            Param(
                "price_range",
                v.price_range,
                s(
                    "object",
                    "Price per person range in USD",
                    properties={"min": s("integer", "Lowest price"), "max": s("integer", "Highest price")},
                    required=["min", "max"],
                ),
                False,
                None,
                ("{v}",),
            ),
            Param("sort_by", v.SORT, e(v.SORT, "Result order"), False, "rating", ("{v}",)),
        ),
        ("find {cuisine} restaurants in {city}", "look up {cuisine} places to eat in {city}"),
        "restaurant",
        lambda a, r: {
            "restaurants": [
                {
                    "restaurant_id": _rid("R-", r),
                    "name": f"{r.choice(v.LAST)}'s",
                    "rating": round(r.uniform(3.5, 5), 1),
                }
            ]
        },
    ),
    Tool(
        "book_table",
        "Reserve a table at a restaurant.",
        (
            Param("restaurant_id", v.ref_id("R-"), s("string", "Restaurant identifier from a search")),
            Param("date", v.date, ISO_DATE),
            Param("time", v.clock_time, HHMM),
            Param("party_size", v.small_int, s("integer", "Number of guests")),
        ),
        ("book table {restaurant_id} for {party_size} on {date} at {time}",),
        "restaurant",
        lambda a, r: {"confirmation": _rid("CONF-", r), "status": "confirmed"},
    ),
    Tool(
        "search_flights",
        "Search flights between two airports (IATA codes).",
        (
            Param("origin", v.airport, s("string", "Origin airport IATA code, e.g. SFO")),
            Param("destination", v.airport, s("string", "Destination airport IATA code")),
            Param("departure_date", v.date, ISO_DATE),
            Param("cabin", v.CABIN, e(v.CABIN, "Cabin class"), False, "economy", ("in {v}",)),
            Param(
                "nonstop",
                v.bool_kind(["nonstop only", "direct flights only"], ["connections are fine"]),
                s("boolean", "Only nonstop flights"),
                False,
                False,
                ("{v}",),
            ),
        ),
        (
            "find flights from {origin} to {destination} on {departure_date}",
            "search for a flight leaving {origin} for {destination} on {departure_date}",
        ),
        "travel",
        lambda a, r: {
            "flights": [
                {
                    "flight_id": f"{r.choice(['UA', 'DL', 'AA'])}{r.randint(100, 999)}",
                    "price": round(r.uniform(90, 900), 2),
                }
            ]
        },
    ),
    Tool(
        "book_flight",
        "Book seats on a flight.",
        (
            Param("flight_id", v.ref_id("UA"), s("string", "Flight identifier from a search")),
            Param("passengers", v.small_int, s("integer", "Number of passengers")),
        ),
        ("book flight {flight_id} for {passengers} passengers",),
        "travel",
        lambda a, r: {"booking_reference": _rid("BK", r), "status": "ticketed"},
    ),
    Tool(
        "search_trains",
        "Search train connections between two US cities.",
        (
            Param("origin", v.city_state, CITY_STATE),
            Param("destination", v.city_state, CITY_STATE),
            Param("date", v.date, ISO_DATE),
        ),
        ("find trains from {origin} to {destination} on {date}",),
        "travel",
    ),
    Tool(
        "get_user_id",
        "Look up a customer's user id by email address.",
        (Param("email", v.email, s("string", "Customer email address", format="email")),),
        ("find the account for {email}",),
        "account",
        lambda a, r: {"user_id": _rid("U", r)},
    ),
    Tool(
        "get_order_history",
        "List a customer's recent orders.",
        (
            Param("user_id", v.ref_id("U"), s("string", "Customer user id")),
            Param(
                "limit",
                v.limit_int,
                s("integer", "Maximum number of orders"),
                False,
                10,
                ("showing {v} orders", "limited to {v}"),
            ),
        ),
        ("show the order history of user {user_id}",),
        "account",
    ),
    Tool(
        "get_order_status",
        "Get the status of an order.",
        (Param("order_id", v.order_id, s("string", "Order number like ORD-12345")),),
        ("check the status of order {order_id}", "find out where my order {order_id} is"),
        "shipping",
    ),
    Tool(
        "track_package",
        "Track a parcel by carrier tracking number.",
        (Param("tracking_number", v.ref_id("1Z"), s("string", "Carrier tracking number")),),
        ("track the package with tracking number {tracking_number}",),
        "shipping",
    ),
    Tool(
        "ship_package",
        "Create a shipping label for a parcel.",
        (
            Param("weight_kg", v.weight_kg, s("number", "Parcel weight in kilograms")),
            Param(
                "destination",
                v.address,
                s(
                    "object",
                    "Destination address; state as a 2-letter code",
                    properties={
                        "street": s("string", "Street"),
                        "city": s("string", "City"),
                        "state": s("string", "2-letter state code"),
                        "zip": s("string", "ZIP code"),
                    },
                    required=["street", "city", "state", "zip"],
                ),
            ),
            Param(
                "express",
                v.bool_kind(["with express delivery", "overnight"], ["with standard delivery"]),
                s("boolean", "Use express delivery"),
                False,
                False,
                ("{v}",),
            ),
        ),
        ("ship a {weight_kg} parcel to {destination}",),
        "shipping",
    ),
    Tool(
        "create_reminder",
        "Create a reminder with a note, date and time.",
        (
            Param("note", v.note, s("string", "Reminder text")),
            Param("date", v.date, ISO_DATE),
            Param("time", v.clock_time, HHMM),
            Param(
                "priority",
                v.PRIORITY,
                e(v.PRIORITY, "Priority"),
                False,
                "medium",
                ("as {v}", "and mark it {v}"),
            ),
            Param("tags", v.tags, s("array", "Labels", items={"type": "string"}), False, [], ("tagged {v}",)),
        ),
        ("remind me {note} on {date} at {time}", "set a reminder {note} for {date} at {time}"),
        "calendar",
    ),
    Tool(
        "create_calendar_event",
        "Add an event to the calendar.",
        (
            Param("title", v.note, s("string", "Event title")),
            Param("date", v.date, ISO_DATE),
            Param("start_time", v.clock_time, HHMM),
            Param("duration_minutes", v.minutes, s("integer", "Length in minutes")),
            Param(
                "attendees",
                v.tags,
                s("array", "Attendee emails", items={"type": "string"}),
                False,
                [],
                ("inviting {v}",),
            ),
        ),
        ("schedule {title} on {date} at {start_time} for {duration_minutes}",),
        "calendar",
    ),
    Tool(
        "find_recipes",
        "Find recipes that use the given ingredients.",
        (
            Param("ingredients", v.ingredients, s("array", "Ingredients to use", items={"type": "string"})),
            Param("diet", v.DIET, e(v.DIET, "Dietary restriction"), False, "none", ("that are {v}",)),
            Param(
                "max_prep_minutes",
                v.minutes,
                s("integer", "Maximum preparation time in minutes"),
                False,
                60,
                ("ready within {v}",),
            ),
        ),
        ("find recipes with {ingredients}", "suggest something to cook using {ingredients}"),
        "food",
    ),
    Tool(
        "convert_currency",
        "Convert an amount between currencies.",
        (
            Param("amount", v.price, s("number", "Amount to convert")),
            Param("from_currency", v.CURRENCY, e(v.CURRENCY, "Source currency code")),
            Param("to_currency", v.CURRENCY, e(v.CURRENCY, "Target currency code")),
        ),
        ("convert {amount} from {from_currency} to {to_currency}",),
        "finance",
    ),
    Tool(
        "calculate_tip",
        "Calculate the tip and per-person share of a bill.",
        (
            Param("bill_amount", v.price, s("number", "Bill total")),
            Param("tip_rate", v.percent, s("number", "Tip as a fraction, e.g. 0.15 for 15%")),
            Param("split", v.small_int, s("integer", "Number of people"), False, 1, ("split {v} ways",)),
        ),
        ("work out a {tip_rate} tip on a {bill_amount} bill",),
        "finance",
    ),
    Tool(
        "log_workout",
        "Log a run, walk or ride.",
        (
            Param("activity", v.MODE, e(v.MODE, "Activity")),
            Param("distance_km", v.distance_km, s("number", "Distance in kilometers")),
            Param("duration_minutes", v.minutes, s("integer", "Duration in minutes")),
            Param("date", v.date, ISO_DATE),
        ),
        ("log {distance_km} {activity} in {duration_minutes} on {date}",),
        "fitness",
    ),
    Tool(
        "get_directions",
        "Get directions between two US cities.",
        (
            Param("origin", v.city_state, CITY_STATE),
            Param("destination", v.city_state, CITY_STATE),
            Param("mode", v.MODE, e(v.MODE, "Travel mode"), False, "driving", ("{v}",)),
        ),
        ("get directions from {origin} to {destination}",),
        "maps",
    ),
    Tool(
        "geocode_city",
        "Get the latitude and longitude of a US city.",
        (Param("location", v.city_state, CITY_STATE),),
        ("find the coordinates of {location}",),
        "maps",
        lambda a, r: {"latitude": round(r.uniform(25, 48), 4), "longitude": round(r.uniform(-122, -71), 4)},
    ),
    Tool(
        "get_air_quality",
        "Get the air quality index at coordinates.",
        (
            Param("latitude", v.latitude, s("number", "Latitude")),
            Param("longitude", v.longitude, s("number", "Longitude")),
        ),
        ("check the air quality at {latitude}, {longitude}",),
        "maps",
    ),
    Tool(
        "check_lottery_numbers",
        "Check lottery numbers against a draw.",
        (
            Param("numbers", v.int_list, s("array", "Numbers played", items={"type": "integer"})),
            Param("draw_date", v.date, ISO_DATE),
        ),
        ("check my lottery numbers {numbers} for the {draw_date} draw",),
        "finance",
    ),
    Tool(
        "send_email",
        "Send an email.",
        (
            Param("to", v.email, s("string", "Recipient email", format="email")),
            Param("subject", v.note, s("string", "Subject line")),
            Param(
                "cc", v.tags, s("array", "CC addresses", items={"type": "string"}), False, [], ("cc'ing {v}",)
            ),
        ),
        ("email {to} with the subject {subject}",),
        "email",
    ),
    Tool(
        "find_movies",
        "Find movies by genre and release year.",
        (
            Param(
                "genre",
                v.enum_kind(
                    {
                        "comedy": ["comedy", "funny"],
                        "drama": ["drama"],
                        "horror": ["horror", "scary"],
                        "sci-fi": ["sci-fi", "science fiction"],
                    }
                ),
                s("string", "Genre"),
            ),
            Param("year", v.year, s("integer", "Release year"), False, None, ("from {v}", "released in {v}")),
        ),
        ("recommend some {genre} movies",),
        "entertainment",
    ),
)
BY_NAME = {t.name: t for t in TOOLS}


@dataclass(frozen=True)
class Chain:
    """first tool, second tool, {second's param: first result key}, phrases for the second step."""

    first: str
    second: str
    link: dict[str, str]
    phrases: tuple[str, ...]


CHAINS = (
    Chain(
        "get_user_id",
        "get_order_history",
        {"user_id": "user_id"},
        ("then show that customer's orders", "and list their recent orders"),
    ),
    Chain(
        "geocode_city",
        "get_air_quality",
        {"latitude": "latitude", "longitude": "longitude"},
        ("then check the air quality there", "and tell me the air quality at that spot"),
    ),
    Chain(
        "find_restaurants",
        "book_table",
        {"restaurant_id": "restaurants.0.restaurant_id"},
        ("then book the top one for {party_size} on {date} at {time}",),
    ),
    Chain(
        "search_flights",
        "book_flight",
        {"flight_id": "flights.0.flight_id"},
        (
            "then book the first flight for {passengers} passengers",
            "and reserve the first option for {passengers} people",
        ),
    ),
)
