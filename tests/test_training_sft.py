"""SFT warm start: loss only on the rendered answer, TRL SFTTrainer and the bare torch loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tooltune.schema import Sample


def _samples(n: int) -> list[Sample]:
    return [
        Sample(
            id=f"s{i}",
            source="t",
            category="simple",
            messages=[{"role": "user", "content": f"f {i}"}],
            tools=[
                {
                    "name": "f",
                    "description": "",
                    "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
                }
            ],
            answer=[{"name": "f", "arguments": {"x": i}}],
            meta={"sft_answer": [{"name": "f", "arguments": {}}]} if i % 2 else {},
        )
        for i in range(n)
    ]


def test_sft_rows_render_the_answer_or_a_meta_target() -> None:
    from tooltune.training.data import sft_rows

    rows = sft_rows(_samples(2), "tool_n1", system_prompt="Tools: {tools}")
    text = rows[0]["completion"][0]["content"]
    assert text.startswith("<think>") and '"x": 0' in text and "</tool_call>" in text
    assert rows[0]["prompt"][-1] == {"role": "user", "content": "f 0"}
    noisy = sft_rows(_samples(2), "tool_n1", target="meta.sft_answer", with_reasoning=False)
    assert noisy[0]["completion"][0]["content"].startswith("<tool_call>")  # no meta key: ground truth
    assert '"arguments": {}' in noisy[1]["completion"][0]["content"]


@pytest.mark.parametrize("engine", ["trl", "torch"])
def test_sft_stage_trains_on_completion_only(engine: str, tiny_model_dir: Path, tmp_path: Path) -> None:
    from tooltune.schema import write_jsonl
    from tooltune.training.config import load_config
    from tooltune.training.runner import train

    data = tmp_path / "train.jsonl"
    write_jsonl(_samples(8), str(data))
    cfg = load_config(
        None,
        {
            "model.name_or_path": str(tiny_model_dir),
            "run.output_dir": str(tmp_path / "run"),
            "run.device": "cpu",
            "data.train": str(data),
            "data.system_prompt": "T: {tools}",
            "sft.enabled": True,
            "sft.engine": engine,
            "sft.max_steps": 3,
            "sft.batch_size": 4,
            "sft.learning_rate": 1e-2,
            "grpo.enabled": False,
            "run.save_steps": 1000,
        },
    )
    run = train(cfg)
    final = run / "sft" / "final"
    from safetensors.torch import load_file

    before, after = (
        load_file(str(tiny_model_dir / "model.safetensors")),
        load_file(str(final / "model.safetensors")),
    )
    assert any(not (before[k] == after[k]).all() for k in before)
    recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    losses = [r for r in recs if r["stage"] == "sft" and "loss" in r]
    assert losses and losses[-1]["step"] == 3


def test_completion_only_labels(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    from tooltune.training.sft import _encode

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    row = {
        "prompt": [{"role": "user", "content": "hi"}],
        "completion": [{"role": "assistant", "content": "ok"}],
    }
    ids, labels = _encode(tok, row, 512)
    n_prompt = len(
        tok(
            tok.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True),
            add_special_tokens=False,
        )["input_ids"]
    )
    assert labels[:n_prompt] == [-100] * n_prompt and labels[n_prompt:] == ids[n_prompt:]
    assert tok.decode(ids[n_prompt:]).startswith("ok")
