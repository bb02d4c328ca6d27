"""ToolRL's SFT file and verl test parquet: the copy shipped with tooltune, the shared parquet, and
hand-made records with the hard cases (every record converted or rejected with a reason)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tooltune import cli
from tooltune.data.pipeline import PrepareConfig, prepare
from tooltune.data.sources import RecordError, get_source
from tooltune.data.sources.base import as_record_error
from tooltune.schema import ToolCall, read_jsonl

toolrl = get_source("toolrl")

INSTRUCTION = (
    "You are a helpful multi-turn dialogue assistant capable of leveraging tool calls.\n\n"
    "**Available Tools**\nIn your response, you can use the following tools:\n"
    "1. Name: Get Weather\nDescription: Current weather of a city.\n"
    'Parameters: {"city": {"description": "City name", "type": "string", "default": ""}}\n'
    "2. Name: add\nDescription: Adds two numbers.\n"
    'Parameters: {"a": {"description": "first", "type": "int", "default": ""}, '
    '"b": {"description": "second", "type": "List[int]", "default": ""}}\n\n'
    "**Steps for Each Turn**\n1. **Think:** …\n\n**Output Format**\n<think> … </think>\n<tool_call>\n…"
)
ONE_CALL = ('<think> The user wants the weather. </think>\n<tool_call>\n'
            '{"name": "Get Weather", "parameters": {"city": "Paris"}}\n</tool_call>')


def _record(dialogue: str = "<user> Weather in Paris? </user>", output: str = ONE_CALL, **extra):
    return {"instruction": INSTRUCTION, "input": f"**Dialogue Records History**\n{dialogue}",
            "output": output, **extra}


def _convert(raw, **options):
    return toolrl.convert(raw, {"file": "rlla_sft.json", "index": 4}, **options)


def test_a_single_turn_record_becomes_one_sample():
    (s,) = _convert(_record())
    assert s.id == "toolrl:rlla_sft.json:4" and s.source == "toolrl" and s.category == "multiple"
    assert s.messages == [{"role": "user", "content": "Weather in Paris?"}]
    assert [t.name for t in s.tools] == ["Get Weather", "add"]
    assert s.tools[0].description == "Current weather of a city."
    assert s.tools[1].parameters["properties"]["a"]["type"] == "integer"
    assert s.tools[1].parameters["properties"]["b"]["type"] == "array"
    assert s.answer == [ToolCall("Get Weather", {"city": "Paris"})]
    assert s.meta["reasoning"] == "The user wants the weather."


def test_a_multi_turn_history_keeps_calls_results_responses_and_reasoning():
    dialogue = (
        "<user> Weather in Paris? </user>\n\n<think> I should call the tool. </think>\n<tool_call>\n"
        '{"name": "Get Weather", "parameters": {"city": "Paris"}}\n</tool_call>\n'
        '<obs> [{"name": "Get Weather", "results": {"temp": 21}}] </obs>\n\n'
        "<think> I should answer. </think>\n<response> It is 21 degrees. </response>\n\n"
        "<user> Now add 2 and [3]. </user>"
    )
    output = ('<think> Add them. </think>\n<tool_call>\n{"name": "add", "parameters": {"a": 2, "b": [3]}}\n'
              '{"name": "add", "parameters": {"a": 1, "b": [1]}}\n</tool_call>')
    raw = _record(dialogue, output)
    assert toolrl.is_multi_turn(raw)
    (s,) = _convert(raw)
    assert [m["role"] for m in s.messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert s.messages[1]["tool_calls"] == [{"name": "Get Weather", "arguments": {"city": "Paris"}}]
    assert s.messages[1]["reasoning"] == "I should call the tool."
    assert s.messages[2]["content"].startswith('[{"name": "Get Weather"')
    assert s.messages[3] == {"role": "assistant", "content": "It is 21 degrees.",
                             "reasoning": "I should answer."}
    assert s.category == "multi_step" and len(s.answer) == 2


def test_a_target_without_calls_is_a_no_call_sample_only_when_asked():
    raw = _record(output="<think> Which city? </think>\n<response> Which city do you mean? </response>")
    assert _convert(raw) == []
    (s,) = _convert(raw, no_call_samples=True)
    assert s.answer == [] and s.category == "irrelevance"
    assert s.meta["no_call"] == "response" and s.meta["reference_text"] == "Which city do you mean?"


def test_reasoning_that_spells_a_tag_is_dropped_and_the_calls_kept():
    output = ONE_CALL.replace("wants the weather.", "wants the weather, inside the <tool_call> tags.")
    (s,) = _convert(_record(output=output))
    assert s.answer == [ToolCall("Get Weather", {"city": "Paris"})]
    assert "reasoning" not in s.meta and s.meta["reasoning_dropped"]


@pytest.mark.parametrize(
    ("raw", "reason", "field"),
    [
        (_record(output="<think> x </think>\n<tool_call>\n{\"name\": \"add\"}\n</tool_call>"),
         "answer_json_error", "output"),
        (_record(output="<think> x </think>\n<tool_call>\n{\"name\": \"add\", \"parameters\": {}}"),
         "formatting_inconsistent", "output"),
        (_record(output="<think> x </think>"), "formatting_inconsistent", "output"),
        (_record(output=ONE_CALL + "\n<tool_call>\n{}\n</tool_call>"), "formatting_inconsistent", "output"),
        (_record(dialogue="<user> hi </user> stray text"), "formatting_inconsistent", "input"),
        (_record(dialogue="<user> hi </user>\n<response> hello </response>"),
         "formatting_inconsistent", "input"),
        (_record(dialogue="<user> hi </user>\n<tool_call>\nnot json\n</tool_call>\n<obs> x </obs>"),
         "call_parse_error", "input.block[1]"),
        ({**_record(), "input": "<user> hi </user>"}, "formatting_inconsistent", "input"),
        ({**_record(), "instruction": "no tools here"}, "tools_not_found", "instruction"),
        ({**_record(), "instruction": INSTRUCTION.replace('Parameters: {"a"', 'Parameters: {"a" oops')},
         "tools_json_error", "instruction.tools[1].parameters"),
        ({**_record(), "instruction": INSTRUCTION.replace("2. Name: add", "2. Name: Get Weather")},
         "formatting_inconsistent", "instruction.tools[1]"),
        ({k: v for k, v in _record().items() if k != "output"}, "missing_field", "output"),
        ({**_record(), "output": 3}, "bad_field_type", "output"),
        ({**_record(), "output": "<think>" + "x" * 200_001}, "too_long", "output"),
        (["not", "an", "object"], "bad_record_type", "<record>"),
    ],
)
def test_a_bad_record_is_refused_with_its_reason(raw, reason, field):
    with pytest.raises(RecordError) as refused:
        _convert(raw)
    assert (refused.value.reason, refused.value.field) == (reason, field)


def test_the_shipped_copy_is_the_released_file_with_its_licence(repo_root: Path):
    folder = repo_root / "tooltune" / "data" / "toolrl"
    assert folder / "rlla_sft.json" == toolrl.PACKAGE_DATA
    assert "Apache License" in (folder / "LICENSE").read_text(encoding="utf-8")
    readme = (folder / "README.md").read_text(encoding="utf-8")
    for origin in ("qiancheng0/ToolRL", "dataset/rlla_4k_raw/rlla_sft.json", "8cee13e"):
        assert origin in readme
    pyproject = (repo_root / "pyproject.toml").read_text(encoding="utf-8")
    assert '"tooltune.data" = ["toolrl/rlla_sft.json", "toolrl/LICENSE", "toolrl/README.md"]' in pyproject


def test_every_shipped_record_is_converted_or_rejected_with_a_reason():
    outcomes: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    for rec in toolrl.read("package"):
        try:
            samples = toolrl.convert(rec.data, rec.position, no_call_samples=True)
        except Exception as e:  # noqa: BLE001 - the pipeline's own accounting of a refused record
            outcomes[as_record_error(e).reason] += 1
            continue
        outcomes["sample"] += len(samples)
        categories.update(s.category for s in samples)
    assert sum(outcomes.values()) == 400
    # one record lists two different tools named 'translate'; every other one converts
    assert outcomes == {"sample": 399, "formatting_inconsistent": 1}
    assert categories["irrelevance"] > 0 and categories["multi_step"] > 0 and categories["parallel"] > 0


def test_the_verl_parquet_reads_its_extra_info(shared_data_dir: Path):
    path = shared_data_dir / "toolrl" / "rlla_test.parquet"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    records = list(toolrl.read(str(path)))
    assert len(records) == 80 and all(set(toolrl.REQUIRED_FIELDS) <= set(r.data) for r in records)
    samples = [s for r in records for s in toolrl.convert(r.data, r.position)]
    assert samples and all(s.answer for s in samples)


def test_prepare_without_input_reads_the_shipped_copy(tmp_path: Path, capsys):
    out = tmp_path / "prepared"
    assert cli.main(["data", "prepare", "--source", "toolrl", "--out", str(out), "--no-progress"]) == 0
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))["sources"]["toolrl"]
    assert stats["records_in"] == 400
    kept = read_jsonl(out / "train.jsonl") + read_jsonl(out / "val.jsonl")
    assert len(kept) == stats["samples_kept"] > 300 and all(s.source == "toolrl" for s in kept)
    lines = (out / "rejected.jsonl").read_text(encoding="utf-8").splitlines()
    rejected = [json.loads(line) for line in lines]
    assert {r["reason"] for r in rejected} >= {"no_tool_call_steps", "formatting_inconsistent"}


def test_a_file_of_another_format_is_refused(tmp_path: Path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"query": "q", "answers": "[]"}]), encoding="utf-8")
    with pytest.raises(Exception, match="field 'instruction' missing"):
        prepare(PrepareConfig(sources=[("toolrl", str(other))], out=str(tmp_path / "out"), progress=False))
    with pytest.raises(Exception, match="no such ToolRL data file"):
        list(toolrl.read(str(tmp_path / "missing.json")))
