"""The official API-Bank tables the re-implemented tools run on, kept as package data (`official_tables/`).

- `SPECS` (`specs.json`): name, description, input and output parameters of every tool the level-1 /
  level-2 data calls, word for word from the class attributes in AlibabaResearch/DAMO-ConvAI
  `api-bank/apis/*.py`: the tool manager validates and converts arguments with `input_parameters`, and
  the ToolSearcher returns these descriptions. `LANGUAGES`: googletrans 3.1.0a0's code -> name table in
  its order (Translate's language detection walks it in this order).
- `DATABASES` (`databases.json`): the initial databases of the tools whose state calls change or whose
  records tokens and ids index, whole from `api-bank/init_database/` (`DATABASE_SOURCES` names each
  file); the official tool manager loads them into every freshly initialised tool, ours deep-copies them.
- `LOOKUPS` (`lookups.json`): the read-only tables (history, symptoms, documents, recordings, images,
  Wikipedia), keeping the records the dialogues look up (`LOOKUP_SOURCES` names each file): each of these
  APIs' checks compares the looked-up key or the whole output, so any other key fails its check whatever
  the full table would return.
- `RECORDED`: the answers of the services that need a network or a model (Dictionary, Translate,
  SearchEngine, ToolSearcher), as the dialogue files record them for the requests they make; Translate is
  keyed by (text, source language, target language).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def _load(name: str) -> dict[str, Any]:
    return json.loads(resources.files(__package__).joinpath("official_tables", name).read_text("utf-8"))


_specs, _databases, _lookups = _load("specs.json"), _load("databases.json"), _load("lookups.json")

SPECS: dict[str, dict[str, Any]] = _specs["tools"]
LANGUAGES: dict[str, str] = _specs["languages"]
DATABASES: dict[str, Any] = _databases["tables"]
DATABASE_SOURCES: dict[str, str] = _databases["sources"]
LOOKUPS: dict[str, Any] = _lookups["tables"]
LOOKUP_SOURCES: dict[str, str] = _lookups["sources"]
RECORDED: dict[str, dict[Any, Any]] = {
    **_lookups["recorded"],
    "Translate": {tuple(key): answer for key, answer in _lookups["recorded"]["Translate"]},
}
