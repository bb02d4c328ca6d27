"""The rows handed to training engines (`tooltune.schema.rows`): names, encoding and the check that names
the source, the record, its sample id and the column."""

from __future__ import annotations

import json

import pytest

from tooltune.schema import Sample, SchemaError, ToolCall, ToolSpec
from tooltune.schema import rows as R


def _row(**over: object) -> dict[str, object]:
    base = {R.PROMPT: [{"role": "user", "content": "hi"}], R.ANSWER: "[]", R.SAMPLE_ID: "s0"}
    return {**base, **over}


def test_encoders_write_the_json_the_readers_read():
    calls = [ToolCall("f", {"x": "é"})]
    assert R.calls_column(calls) == '[{"name": "f", "arguments": {"x": "é"}}]'  # not ASCII-escaped
    tools = [ToolSpec("f", "Look up x.", {"type": "object", "properties": {}})]
    assert R.load_json_column(R.tools_column(tools)) == [t.to_dict() for t in tools]
    assert R.load_json_column(R.meta_column({"when": object})) == {"when": str(object)}  # odd values as text
    assert R.load_json_column("{not json") is None and R.load_json_column("  ") is None
    assert R.row_tools({R.CHAT_TOOLS: json.dumps([{"type": "function"}])}) == [{"type": "function"}]
    assert R.row_tools({}) is None


def test_a_task_loads_from_its_json_text_or_object_and_names_the_column_otherwise():
    task = Sample(id="t", source="x", category="multi_step", messages=[{"role": "user", "content": "go"}],
                  tools=[], answer=[])
    assert R.load_task(task.to_json()).id == R.load_task(task.to_dict()).id == "t"
    with pytest.raises(SchemaError, match="row column 'task': expected the task's JSON text, got int"):
        R.load_task(3)


@pytest.mark.parametrize(("row", "message"), [
    (_row(answer=None, prompt_index=1),
     r"train.jsonl: record 1 \(sample_id 's0'\).answer: missing ground truth"),
    (_row(answer="{"), r"record 1 .*\.answer: ground truth is not valid JSON"),
    (_row(answer='{"name": "f"}'), r"\.answer: ground truth must be a list of calls, got dict"),
    (_row(prompt=[]), r"\.prompt: missing prompt"),
    (_row(prompt_index="0"), r"\.prompt_index: expected an integer, got str"),
    (_row(task="{}", prompt_index=1), r"\.task: not a task"),
])
def test_check_rows_names_source_record_sample_and_column(row, message):
    with pytest.raises(SchemaError, match=message):
        R.check_rows([_row(prompt_index=0, task=_task_text()), row],
                     (R.PROMPT, R.ANSWER, R.PROMPT_INDEX, R.TASK), "train.jsonl")


def _task_text() -> str:
    return Sample(id="t", source="x", category="multi_step", messages=[{"role": "user", "content": "go"}],
                  tools=[], answer=[]).to_json()


def test_a_missing_column_is_named_with_its_reader():
    with pytest.raises(SchemaError, match=r"rows: record 0 \(sample_id 's0'\): no 'meta' column, which "
                                          r"the rollout reads \(it has: answer, prompt, sample_id\)"):
        R.check_rows([_row()], (R.PROMPT, R.META), "rows", "the rollout")


def test_missing_columns_names_all_missing_the_reader_and_the_hint():
    with pytest.raises(SchemaError) as err:
        R.missing_columns(["prompt"], [R.TASK, R.ANSWER], "train_dataset", "MyEnvironment",
                          "use environment_rows")
    assert str(err.value) == ("train_dataset: no 'task', 'answer' columns, which MyEnvironment reads "
                              "(it has: prompt); use environment_rows")
    R.missing_columns(["prompt", "task"], [R.TASK], "train_dataset")  # nothing missing: no error
