"""Exports: TRL rows / HF dataset columns, verl parquet schema, JSONL round trip."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from tooltune.config import UnknownName
from tooltune.data.export import export, to_hf_dataset, to_trl_rows, to_verl_rows
from tooltune.data.synthetic import SynthConfig, write
from tooltune.prompts import PromptControls, render_prompt
from tooltune.rewards import binary_reward
from tooltune.schema import Sample, SchemaError, read_jsonl


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> list[Sample]:
    path = tmp_path_factory.mktemp("exp") / "s.jsonl"
    write(SynthConfig(n=40, seed=2), str(path))
    return read_jsonl(str(path))


def test_trl_rows_columns(samples):
    rows = to_trl_rows(samples, PromptControls("r2if", history="context"))
    assert len(rows) == len(samples)
    for row, s in zip(rows, samples):
        assert set(row) == {"prompt", "answer", "sample_id", "category", "tools", "meta"}
        assert row["prompt"] == render_prompt(s, template="r2if", history="context")
        assert json.loads(row["answer"]) == [c.to_dict() for c in s.answer]
        assert [t["name"] for t in json.loads(row["tools"])] == s.tool_names
        assert json.loads(row["meta"]) == s.meta and row["sample_id"] == s.id


def test_hf_dataset(samples):
    ds = to_hf_dataset(samples)
    assert ds.num_rows == len(samples) and ds[0]["prompt"][0]["role"] == "system"
    assert to_hf_dataset([]).num_rows == 0


def test_verl_rows_and_parquet(samples, tmp_path: Path):
    import pyarrow.parquet as pq

    rows = to_verl_rows(samples, "tool_n1")
    row = rows[3]
    assert row["reward_model"]["style"] == "rule" and row["ability"] == "tool_calling"
    assert row["data_source"] == "tooltune/synthetic" and row["extra_info"]["index"] == 3
    src = tmp_path / "s.jsonl"
    src.write_text("".join(s.to_json() + "\n" for s in samples))
    n = export([str(src)], "verl", str(tmp_path / "train.parquet"))
    table = pq.read_table(tmp_path / "train.parquet").to_pylist()
    assert n == len(table) == len(samples)
    for rec, s in zip(table, samples):
        assert rec["extra_info"]["sample_id"] == s.id
        gold = json.loads(rec["reward_model"]["ground_truth"])
        from tooltune.prompts import render_answer

        assert binary_reward(render_answer(s.answer, "tool_n1"), gold) == 1.0
        # the rendered prompt travels in extra_info too: verl gives compute_score nothing else
        assert rec["extra_info"]["prompt"] == rec["prompt"] and rec["prompt"][-1]["role"] in ("user", "tool")


def test_jsonl_export_round_trip(samples, tmp_path: Path):
    src = tmp_path / "a.jsonl"
    src.write_text("".join(s.to_json() + "\n" for s in samples))
    export([str(src)], "jsonl", str(tmp_path / "b.jsonl"))
    assert [s.to_dict() for s in read_jsonl(str(tmp_path / "b.jsonl"))] == [s.to_dict() for s in samples]
    with pytest.raises(UnknownName, match="format: unknown export format 'csv'; registered: hf, jsonl, verl"):
        export([str(src)], "csv", str(tmp_path / "c"))
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    "hostile, cause",
    [
        (b"[" * 100_000 + b"]" * 100_000, "nesting deeper than 100"),
        (b'{"id": "x", "n": ' + b"9" * 5000 + b"}", "4300 digits"),
        (b'{"id": "x", "answer": [{"name": "f", "arguments": {"a": NaN}}]}', "NaN is not a finite number"),
        (b'{"id": "\xff"}', "not valid UTF-8"),
    ],
)
def test_export_names_file_and_line_of_a_hostile_record(samples, tmp_path: Path, hostile, cause):
    src = tmp_path / "in.jsonl"
    src.write_bytes(samples[0].to_json().encode() + b"\n" + hostile + b"\n")
    for fmt in ("jsonl", "verl"):
        out = tmp_path / f"out.{fmt}"
        with pytest.raises(SchemaError, match=rf"in\.jsonl:2: .*{cause}"):
            export([str(src)], fmt, str(out))
        assert not out.exists()  # every input is read before anything is written


@pytest.mark.parametrize("content", [gzip.compress(b'{"id": "x"}\n'), random.Random(1).randbytes(4096)])
def test_export_refuses_a_binary_file_naming_it(tmp_path: Path, content):
    src = tmp_path / "blob.jsonl"
    src.write_bytes(content)
    with pytest.raises(SchemaError, match=r"blob\.jsonl:1: not valid"):
        export([str(src)], "jsonl", str(tmp_path / "out.jsonl"))
