"""Value kinds for the synthetic generator: each draws (JSON value, the words a user would say).

A kind knows its JSON-Schema fragment and how a person states a value. With `transform` the
surface form needs a rule the tool description states: a US state written out where the tool
wants its abbreviation, a date in words where it wants ISO, grams where it wants kilograms, hours
where it wants minutes, a paraphrase of an enum value. These are the decisions a policy can get
wrong and a verifiable reward can teach.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

STATES = {
    "CA": "California",
    "TX": "Texas",
    "NY": "New York",
    "WA": "Washington",
    "IL": "Illinois",
    "MA": "Massachusetts",
    "FL": "Florida",
    "CO": "Colorado",
    "OR": "Oregon",
    "GA": "Georgia",
    "AZ": "Arizona",
    "PA": "Pennsylvania",
}
CITIES = [
    ("San Francisco", "CA"),
    ("Los Angeles", "CA"),
    ("San Diego", "CA"),
    ("Austin", "TX"),
    ("Houston", "TX"),
    ("Dallas", "TX"),
    ("New York", "NY"),
    ("Buffalo", "NY"),
    ("Seattle", "WA"),
    ("Spokane", "WA"),
    ("Chicago", "IL"),
    ("Boston", "MA"),
    ("Cambridge", "MA"),
    ("Miami", "FL"),
    ("Orlando", "FL"),
    ("Denver", "CO"),
    ("Boulder", "CO"),
    ("Portland", "OR"),
    ("Atlanta", "GA"),
    ("Phoenix", "AZ"),
    ("Tucson", "AZ"),
    ("Philadelphia", "PA"),
    ("Pittsburgh", "PA"),
]
AIRPORTS = {
    "SFO": "San Francisco",
    "JFK": "New York",
    "LAX": "Los Angeles",
    "ORD": "Chicago",
    "SEA": "Seattle",
    "BOS": "Boston",
    "DEN": "Denver",
    "ATL": "Atlanta",
    "MIA": "Miami",
    "AUS": "Austin",
}
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
FIRST = [
    "Alice",
    "Bob",
    "Carmen",
    "Deepak",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jamal",
    "Kofi",
    "Lena",
    "Mateo",
    "Nadia",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
]
LAST = ["Nguyen", "Smith", "O'Brien", "Garcia", "Kowalski", "Okafor", "Tanaka", "Müller", "Rossi", "Patel"]
WORDS = {
    "1": "one",
    "2": "two",
    "3": "three",
    "4": "four",
    "5": "five",
    "6": "six",
    "7": "seven",
    "8": "eight",
    "9": "nine",
    "10": "ten",
    "11": "eleven",
    "12": "twelve",
}
NOTES = [
    "Call Bob (re: budget, Q3)",
    "Pick up eggs, milk, and bread",
    'Review "Project Apollo" draft',
    "Don't forget: 3 boxes, 2 bags",
    "Dentist @ 4pm (bring insurance card)",
    "Email Ana re: slides [v2]",
    "Pay rent, then water bill",
    "Book flights for Mom & Dad",
    "Renew passport (expires soon)",
]
INGREDIENTS = [
    "eggs",
    "flour",
    "sugar",
    "butter",
    "tomatoes",
    "basil",
    "garlic",
    "rice",
    "chicken",
    "spinach",
    "lemons",
    "mushrooms",
    "onions",
    "cheese",
]
TAGS = ["urgent", "work", "personal", "finance", "travel", "health", "family", "errands"]

Kind = Callable[[random.Random, bool], tuple[Any, str]]


def city_state(rng: random.Random, transform: bool) -> tuple[str, str]:
    city, st = rng.choice(CITIES)
    return f"{city}, {st}", f"{city}, {STATES[st]}" if transform else f"{city}, {st}"


def airport(rng: random.Random, transform: bool) -> tuple[str, str]:
    code = rng.choice(list(AIRPORTS))
    return code, f"{AIRPORTS[code]} ({code})" if not transform else f"{AIRPORTS[code]}'s main airport, {code}"


def date(rng: random.Random, transform: bool) -> tuple[str, str]:
    y, m, d = rng.choice((2024, 2025, 2026)), rng.randint(1, 12), rng.randint(1, 28)
    iso = f"{y:04d}-{m:02d}-{d:02d}"
    if not transform:
        return iso, iso
    style = rng.randrange(3)
    if style == 0:
        return iso, f"{MONTHS[m - 1]} {d}, {y}"
    if style == 1:
        return iso, f"{d} {MONTHS[m - 1]} {y}"
    return iso, f"{m:02d}/{d:02d}/{y}"


def clock_time(rng: random.Random, transform: bool) -> tuple[str, str]:
    h, mi = rng.randint(7, 21), rng.choice((0, 15, 30, 45))
    value = f"{h:02d}:{mi:02d}"
    if not transform:
        return value, value
    suffix = "am" if h < 12 else "pm"
    h12 = h if h <= 12 else h - 12
    return value, f"{h12}:{mi:02d} {suffix}" if mi else f"{h12} {suffix}"


def small_int(rng: random.Random, transform: bool) -> tuple[int, str]:
    n = rng.randint(1, 12)
    return n, WORDS[str(n)] if transform else str(n)


def limit_int(rng: random.Random, transform: bool) -> tuple[int, str]:
    n = rng.choice((3, 5, 10, 15, 20, 25, 50))
    return n, str(n)


def year(rng: random.Random, transform: bool) -> tuple[int, str]:
    n = rng.randint(1990, 2025)
    return n, str(n)


def price(rng: random.Random, transform: bool) -> tuple[float, str]:
    v = round(rng.uniform(5, 500), 2)
    return v, f"${v:,.2f}"


def weight_kg(rng: random.Random, transform: bool) -> tuple[float, str]:
    v = rng.choice((0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.5, 12.0))
    return v, f"{int(v * 1000)} grams" if transform else f"{v:g} kg"


def distance_km(rng: random.Random, transform: bool) -> tuple[float, str]:
    v = rng.choice((0.5, 1.0, 2.5, 5.0, 10.0, 21.1, 42.2))
    return v, f"{int(v * 1000)} meters" if transform else f"{v:g} km"


def minutes(rng: random.Random, transform: bool) -> tuple[int, str]:
    h = rng.choice((1, 2, 3))
    if transform:
        return h * 60, f"{h} hour{'s' if h > 1 else ''}"
    v = rng.choice((15, 20, 30, 45, 90))
    return v, f"{v} minutes"


def percent(rng: random.Random, transform: bool) -> tuple[float, str]:
    v = rng.choice((0.05, 0.1, 0.15, 0.2, 0.25))
    return v, f"{int(v * 100)}%" if transform else f"{v:g}"


def person(rng: random.Random, transform: bool) -> tuple[str, str]:
    v = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    return v, v


def email(rng: random.Random, transform: bool) -> tuple[str, str]:
    v = f"{rng.choice(FIRST).lower()}.{rng.choice(LAST).lower().replace(chr(39), '')}@example.com"
    return v, v


def order_id(rng: random.Random, transform: bool) -> tuple[str, str]:
    v = f"ORD-{rng.randint(10000, 99999)}"
    return v, v


def ref_id(prefix: str) -> Kind:
    def draw(rng: random.Random, transform: bool) -> tuple[str, str]:
        value = f"{prefix}{rng.randint(1000, 99999)}"
        return value, value

    return draw


def latitude(rng: random.Random, transform: bool) -> tuple[float, str]:
    value = round(rng.uniform(25, 48), 4)
    return value, str(value)


def longitude(rng: random.Random, transform: bool) -> tuple[float, str]:
    value = round(rng.uniform(-122, -71), 4)
    return value, str(value)


def note(rng: random.Random, transform: bool) -> tuple[str, str]:
    v = rng.choice(NOTES)
    return v, f'"{v}"'


def ingredients(rng: random.Random, transform: bool) -> tuple[list[str], str]:
    items = rng.sample(INGREDIENTS, rng.randint(2, 4))
    return items, ", ".join(items[:-1]) + " and " + items[-1]


def tags(rng: random.Random, transform: bool) -> tuple[list[str], str]:
    items = rng.sample(TAGS, rng.randint(1, 3))
    return items, " and ".join(f"'{t}'" for t in items)


def int_list(rng: random.Random, transform: bool) -> tuple[list[int], str]:
    items = sorted(rng.sample(range(1, 40), rng.randint(2, 5)))
    return items, ", ".join(map(str, items))


def price_range(rng: random.Random, transform: bool) -> tuple[dict[str, int], str]:
    lo = rng.choice((10, 20, 50, 100))
    hi = lo * rng.choice((2, 3, 5))
    return {"min": lo, "max": hi}, f"between ${lo} and ${hi}"


def address(rng: random.Random, transform: bool) -> tuple[dict[str, str], str]:
    city, st = rng.choice(CITIES)
    street = f"{rng.randint(10, 999)} {rng.choice(('Oak', 'Pine', 'Maple', 'Elm', 'Cedar'))} St"
    zip_code = f"{rng.randint(10000, 99999)}"
    value = {"street": street, "city": city, "state": st, "zip": zip_code}
    state_words = STATES[st] if transform else st
    return value, f"{street}, {city}, {state_words} {zip_code}"


def enum_kind(options: dict[str, list[str]]) -> Kind:
    """An enum whose values may be asked for by paraphrase: options = {value: [plain, *paraphrases]}."""

    def draw(rng: random.Random, transform: bool) -> tuple[str, str]:
        value = rng.choice(list(options))
        words = options[value]
        return value, rng.choice(words[1:]) if transform and len(words) > 1 else words[0]

    draw.enum = list(options)  # type: ignore[attr-defined]
    return draw


def bool_kind(yes: list[str], no: list[str]) -> Kind:
    def draw(rng: random.Random, transform: bool) -> tuple[bool, str]:
        v = rng.random() < 0.6
        return v, rng.choice(yes if v else no)

    return draw


UNIT_TEMP = enum_kind(
    {
        "celsius": ["in Celsius", "in metric units", "in degrees C"],
        "fahrenheit": ["in Fahrenheit", "in imperial units", "in degrees F"],
    }
)
CUISINE = enum_kind(
    {
        "italian": ["Italian"],
        "japanese": ["Japanese", "sushi"],
        "mexican": ["Mexican", "taco"],
        "indian": ["Indian", "curry"],
        "thai": ["Thai"],
    }
)
CABIN = enum_kind(
    {
        "economy": ["economy", "coach"],
        "business": ["business class", "business"],
        "first": ["first class", "first"],
    }
)
PRIORITY = enum_kind(
    {
        "low": ["low priority", "not urgent"],
        "medium": ["medium priority", "normal priority"],
        "high": ["high priority", "urgent", "top priority"],
    }
)
SORT = enum_kind(
    {
        "price": ["sorted by price", "cheapest first"],
        "rating": ["sorted by rating", "best rated first"],
        "distance": ["sorted by distance", "closest first"],
    }
)
CURRENCY = enum_kind(
    {
        "USD": ["US dollars", "dollars"],
        "EUR": ["euros", "EUR"],
        "JPY": ["Japanese yen", "yen"],
        "GBP": ["British pounds", "pounds sterling"],
    }
)
DIET = enum_kind(
    {
        "vegetarian": ["vegetarian", "meat-free"],
        "vegan": ["vegan", "plant-based"],
        "gluten_free": ["gluten-free", "without gluten"],
        "none": ["no dietary restriction", "anything"],
    }
)
MODE = enum_kind(
    {
        "driving": ["by car", "driving"],
        "walking": ["on foot", "walking"],
        "transit": ["by public transit", "by bus or train"],
        "cycling": ["by bike", "cycling"],
    }
)
