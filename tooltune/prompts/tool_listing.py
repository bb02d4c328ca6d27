"""How a prompt template lists the offered tools in its system text: `TOOL_FORMATS`, by name.

- ``json``: one compact JSON object per tool, one per line (`tools_block`);
- ``signatures``: one signature line per tool (`tool_signatures`), the fewest tokens;
- ``json_list``: one JSON list indented by 4, as bfcl-eval lists functions (`tools_json_list`);
- ``chat_template``: nothing; the tools go to the tokenizer's chat template (`no_tools_listing`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from tooltune.config import Registry
from tooltune.schema import ToolSpec


def tools_block(tools: Sequence[ToolSpec]) -> str:
    """One compact JSON object per tool, one per line."""
    return "\n".join(json.dumps(t.to_dict(), ensure_ascii=False, separators=(", ", ": ")) for t in tools)


def _signature_type(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "|".join(v if isinstance(v, str) else json.dumps(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list[{_signature_type(schema.get('items'))}]"
    return "|".join(map(str, kind)) if isinstance(kind, list) else str(kind)


def tool_signatures(tools: Sequence[ToolSpec]) -> str:
    """One signature line per tool, e.g. ``get_weather(city: string, unit: celsius|fahrenheit)``.

    Optional parameters end in ``?``; the description follows `` - ``. Fewer tokens than
    `tools_block` (quickstart prompts: 71 tokens on average instead of 105): the format for small models
    whose cost grows with prompt length and that learn to copy arguments faster from shorter prompts."""
    lines = []
    for t in tools:
        required = set(t.required)
        params = ", ".join(
            f"{name}{'' if name in required else '?'}: {_signature_type(schema)}"
            for name, schema in t.properties.items()
        )
        lines.append(f"{t.name}({params})" + (f" - {t.description}" if t.description else ""))
    return "\n".join(lines)


def tools_json_list(tools: Sequence[ToolSpec]) -> str:
    """The tools as one JSON list indented by 4, the way bfcl-eval lists functions in its prompt."""
    return json.dumps([t.to_dict() for t in tools], indent=4)


def no_tools_listing(tools: Sequence[ToolSpec]) -> str:
    """Nothing: the chat template lists the tools (`tooltune.prompts.native.chat_tools`)."""
    return ""


TOOL_FORMATS: Registry[Callable[[Sequence[ToolSpec]], str]] = Registry("tools format", "tools_format")
"""How a template lists the offered tools inside its system prompt (``chat_template``: not at all; the
tools go to the tokenizer's chat template, and a ``{tools}`` placeholder is left empty)."""
for _name, _lister in (("json", tools_block), ("signatures", tool_signatures), ("json_list", tools_json_list),
                       ("chat_template", no_tools_listing)):
    TOOL_FORMATS.add(_name, _lister)
