"""SMV annotators: rule-based (on real BFCL function documents), per tool and per sample by a model (a
scripted backend plays it; cache, resume, fallback)."""

import json
from pathlib import Path

import pytest

from tooltune.data.sources.types import tool_spec_from_source
from tooltune.generation import ScriptedBackend
from tooltune.rewards.annotate import (
    META_KEY,
    LLMAnnotator,
    RuleAnnotator,
    annotate_samples,
    parse_annotation_reply,
    rule_modification,
)
from tooltune.rewards.annotate_sample import (
    NO_MODIFY,
    NO_SPEC,
    SampleAnnotator,
    parse_sample_annotation_reply,
    sample_annotation_prompt,
    sample_targets,
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


# --- per-sample annotations (R2IF) -------------------------------------------------------------------

FLIGHT = ToolSpec.from_dict(
    {
        "name": "book_flight",
        "description": "Book a flight.",
        "parameters": {
            "type": "object",
            "required": ["date", "city"],
            "properties": {
                "date": {"type": "string", "description": "Departure date, YYYY-MM-DD"},
                "city": {"type": "string"},
                "seat": {"type": "string", "enum": ["aisle", "window"]},
            },
        },
    }
)


def _sample(sid, answer, tools=(FLIGHT, CLOCK), query="Fly me to Paris on May 1st 2025, window seat."):
    return Sample(id=sid, source="t", category="simple" if answer else "irrelevance",
                  messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": query}],
                  tools=list(tools), answer=answer)


FLIGHT_CALL = [
    {"name": "book_flight", "arguments": {"date": "2025-05-01", "city": "Paris", "seat": "window"}}
]
GOOD_REPLY = json.dumps({"book_flight": {
    "date": {"spec": "The departure date in YYYY-MM-DD.", "mod": "May 1st 2025 becomes 2025-05-01."},
    "city": {"spec": "no spec", "mod": "no modify"},
    "seat": {"spec": "One of aisle or window.", "mod": ""},
}})


class Annotator:
    """A ScriptedBackend playing the annotating model: replies by sample id, counts requests."""

    def __init__(self, replies, name="annotator"):
        self.replies, self.prompts = replies, []
        self.backend = ScriptedBackend(self._reply, name=name)

    def _reply(self, request):
        self.prompts.append((request.id, request.messages[-1]["content"]))
        return self.replies[request.id]


def test_sample_prompt_shows_query_called_docs_ground_truth_and_targets():
    s = _sample("s1", FLIGHT_CALL)
    prompt = sample_annotation_prompt(s)
    assert "User: Fly me to Paris on May 1st 2025" in prompt and "be brief" not in prompt
    assert '"name": "book_flight"' in prompt and '"name": "clock"' not in prompt  # only the called tool
    assert json.dumps(s.answer[0].to_dict()) in prompt
    assert "book_flight: date, city, seat" in prompt
    assert '"no spec"' in prompt and '"no modify"' in prompt
    # required arguments the call leaves out are annotated too (SMV scores them)
    partial = _sample("s2", [{"name": "book_flight", "arguments": {"date": "2025-05-01"}}])
    assert sample_targets(partial) == {"book_flight": ["date", "city"]}
    assert sample_targets(_sample("s3", [])) == {}
    braces = "Use {functions} and {calls} literally"
    tricky = sample_annotation_prompt(_sample("s4", FLIGHT_CALL, query=braces))
    assert "User: Use {functions} and {calls} literally" in tricky and tricky.count("Correct calls:\n[{") == 1


def test_parse_sample_reply_reads_json_only_and_needs_every_target():
    targets = {"book_flight": ["date", "city", "seat"]}
    got = parse_sample_annotation_reply("Sure:\n" + GOOD_REPLY + "\nDone.", targets)
    assert got["book_flight"]["city"] == {"spec": NO_SPEC, "mod": NO_MODIFY}
    assert got["book_flight"]["seat"]["mod"] == NO_MODIFY  # an empty note means nothing applies
    flat = json.loads(GOOD_REPLY)["book_flight"]  # one function: the function level may be left out
    assert parse_sample_annotation_reply(json.dumps(flat), targets) == got
    del flat["seat"]
    assert parse_sample_annotation_reply(json.dumps({"book_flight": flat}), targets) is None
    not_text = '{"book_flight": {"date": {"spec": 1, "mod": "x"}}}'
    assert parse_sample_annotation_reply(not_text, targets) is None
    assert parse_sample_annotation_reply("__import__('os').system('true')", targets) is None
    assert parse_sample_annotation_reply("{" * 5000 + "}" * 5000, targets) is None


def test_sample_annotator_caches_resumes_falls_back_and_skips_no_call_samples(tmp_path):
    cache = tmp_path / "smv" / "annotations.jsonl"
    samples = [_sample("good", FLIGHT_CALL), _sample("bad", FLIGHT_CALL), _sample("none", [])]
    played = Annotator({"good": GOOD_REPLY, "bad": "I would rather not."})
    annotate_samples(samples, SampleAnnotator(played.backend, cache_path=cache, batch_size=8))
    # no request for a sample that calls nothing
    assert sorted(i for i, _ in played.prompts) == ["bad", "good"]
    assert samples[0].meta[META_KEY]["book_flight"]["date"]["mod"] == "May 1st 2025 becomes 2025-05-01."
    assert samples[1].meta[META_KEY] == RuleAnnotator().annotate(samples[1].tools)  # unusable reply: rules
    assert samples[2].meta[META_KEY] == {}
    lines = [json.loads(x) for x in cache.read_text().splitlines()]
    assert [(r["id"], r["annotator"]) for r in lines] == [("good", "llm-sample:annotator")]

    # resume: cached samples are not asked again; the fallback one is, and a torn line is ignored
    with cache.open("a") as f:
        f.write('{"id": "bad", "annot')
    again = Annotator({"bad": GOOD_REPLY})
    fresh = [_sample("good", FLIGHT_CALL), _sample("bad", FLIGHT_CALL)]
    annotate_samples(fresh, SampleAnnotator(again.backend, cache_path=cache))
    assert [i for i, _ in again.prompts] == ["bad"]
    assert fresh[0].meta[META_KEY] == samples[0].meta[META_KEY]

    # the key is sample id + annotator: another model, or a changed sample, is asked again
    other = Annotator({"good": GOOD_REPLY}, name="other-model")
    SampleAnnotator(other.backend, cache_path=cache).annotate_sample(_sample("good", FLIGHT_CALL))
    changed = Annotator({"good": GOOD_REPLY})
    SampleAnnotator(changed.backend, cache_path=cache).annotate_sample(
        _sample("good", FLIGHT_CALL, query="Fly me to Paris on the first of May 2025, window seat."))
    assert [i for i, _ in other.prompts] == ["good"] and [i for i, _ in changed.prompts] == ["good"]
