"""SMV annotators: rule-based (on real BFCL function documents) and LLM-based (scripted backend, cache)."""

import json
from pathlib import Path

import pytest

from tooltune.data.sources.types import tool_spec_from_source
from tooltune.rewards.annotate import (
    META_KEY,
    LLMAnnotator,
    RuleAnnotator,
    annotate_samples,
    parse_annotation_reply,
    rule_modification,
)
from tooltune.schema import Sample, ToolSpec


def bfcl_tools(
    limit_files=("BFCL_v4_simple_python.json", "BFCL_v4_multiple.json", "BFCL_v4_live_simple.json"),
):
    bfcl_eval = pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")
    data = Path(bfcl_eval.__file__).parent / "data"
    tools = []
    for name in limit_files:
        for line in (data / name).read_text(encoding="utf-8").splitlines():
            tools += [tool_spec_from_source(f) for f in json.loads(line)["function"]]
    return tools


@pytest.mark.parametrize(
    "desc, schema, expected",
    [
        ("The city and state, e.g. San Francisco, CA", {"type": "string"}, "city followed by its state"),
        ("Date in the format YYYY-MM-DD", {"type": "string"}, "format YYYY-MM-DD"),
        ("Must be in MM-DD-YYYY format.", {"type": "string"}, "format MM-DD-YYYY"),
        ("The height in meters.", {"type": "number"}, "to meters"),
        ("Start of the range. Four decimal places.", {"type": "number"}, "four decimal places"),
        ("Interest rate as a decimal, e.g. 0.05 for 5%", {"type": "number"}, "decimal fraction"),
        ("Discount percentage", {"type": "number"}, "out of 100"),
        ("Unit", {"type": "string", "enum": ["celsius", "fahrenheit"]}, '"celsius", "fahrenheit"'),
        ("How many", {"type": "integer"}, "whole number"),
        ("Free text", {"type": "string"}, "exactly as the user gives it"),
    ],
)
def test_rule_modification_reads_formats_from_descriptions(desc, schema, expected):
    assert expected in rule_modification("p", {**schema, "description": desc})


def test_rule_annotator_covers_every_parameter_of_real_bfcl_functions():
    tools = bfcl_tools()
    annotator = RuleAnnotator()
    n = 0
    city_state = 0
    for tool in tools:
        ann = annotator.annotate_tool(tool)
        assert set(ann) == set(tool.properties)
        for pname, a in ann.items():
            n += 1
            assert a["spec"].strip() and a["mod"].strip()
            desc = str(tool.properties[pname].get("description", ""))
            if "City, State" in desc or "city and state" in desc.lower():
                city_state += 1
                assert "city followed by" in a["mod"]
    assert n > 1000 and city_state > 0


class ScriptedAnnotatorBackend:
    name = "scripted"

    def __init__(self, replies):
        self.replies, self.requests = replies, []

    def generate(self, requests):
        self.requests.append(requests)
        out = []
        for r in requests:
            tool = json.loads(r.messages[-1]["content"].split("Function:\n", 1)[1])
            out.append([self.replies.get(tool["name"], "sorry, no JSON here")])
        return out


WEATHER = ToolSpec.from_dict(
    {
        "name": "weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City, State"}},
        },
    }
)
CLOCK = ToolSpec.from_dict(
    {"name": "clock", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}
)


def test_parse_annotation_reply():
    good = 'Here: {"city": {"spec": "where", "mod": "City, ST"}} done'
    assert parse_annotation_reply(good, WEATHER) == {"city": {"spec": "where", "mod": "City, ST"}}
    assert parse_annotation_reply('{"city": {"spec": "where"}}', WEATHER) is None
    assert parse_annotation_reply("[1, 2]", WEATHER) is None
    assert parse_annotation_reply("{" * 5000 + "}" * 5000, WEATHER) is None


def test_llm_annotator_batches_falls_back_and_resumes_from_its_cache(tmp_path):
    backend = ScriptedAnnotatorBackend({"weather": json.dumps({"city": {"spec": "S", "mod": "M"}})})
    cache = tmp_path / "ann.jsonl"
    samples = [
        Sample(
            id=f"s{i}",
            source="t",
            category="simple",
            messages=[{"role": "user", "content": "q"}],
            tools=[WEATHER, CLOCK],
            answer=[],
        )
        for i in range(3)
    ]
    annotate_samples(samples, LLMAnnotator(backend, cache_path=cache))
    assert len(backend.requests) == 1 and len(backend.requests[0]) == 2  # two distinct tools, one call
    assert samples[0].meta[META_KEY]["weather"] == {"city": {"spec": "S", "mod": "M"}}
    assert samples[2].meta[META_KEY]["clock"] == RuleAnnotator().annotate_tool(CLOCK)  # fallback
    assert "Use the value as the user gives it" in backend.requests[0][0].messages[0]["content"]
    again = ScriptedAnnotatorBackend({})
    assert LLMAnnotator(again, cache_path=cache).annotate([WEATHER])["weather"]["city"]["mod"] == "M"
    assert again.requests == []
