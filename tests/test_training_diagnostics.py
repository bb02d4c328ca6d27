"""Diagnostics helpers: reasoning vs tool-call token regions, metrics truncation on resume."""

from __future__ import annotations

import json
from pathlib import Path

import torch


def test_region_tagger_splits_reasoning_and_call_tokens(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    from tooltune.training.diagnostics import RegionTagger

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    text = '<think>weather</think>\n<tool_call>\n[{"name": "f"}]\n</tool_call>'
    ids = tok(text, add_special_tokens=False)["input_ids"]
    codes = RegionTagger(tok, "tool_n1").codes(ids)
    pieces = [tok.decode([i]) for i in ids]
    reasoning = "".join(p for p, c in zip(pieces, codes, strict=True) if c == 1)
    call = "".join(p for p, c in zip(pieces, codes, strict=True) if c == 2)
    assert reasoning == "weather"
    assert call.strip() == '[{"name": "f"}]'
    assert all(c == 0 for p, c in zip(pieces, codes, strict=True) if p.startswith("<"))  # the tags themselves
    # batched form: padding positions (mask 0) are region 0
    batch = torch.tensor([ids + [0, 0]])
    mask = torch.tensor([[1] * len(ids) + [0, 0]])
    out = RegionTagger(tok, "tool_n1")(batch, mask)
    assert (
        out.shape == batch.shape and out[0, -2:].tolist() == [0, 0] and out[0, : len(ids)].tolist() == codes
    )


def test_region_tagger_unclosed_reasoning_and_python_grammar(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    from tooltune.training.diagnostics import RegionTagger

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    ids = tok("<think>still thinking", add_special_tokens=False)["input_ids"]
    assert set(RegionTagger(tok, "tool_n1").codes(ids)[1:]) == {1}  # truncated inside reasoning
    ids = tok("[f(x=1)]", add_special_tokens=False)["input_ids"]
    assert set(RegionTagger(tok, "bfcl").codes(ids)) == {2}  # bare python calls: all call tokens


def test_truncate_metrics_keeps_other_stages_and_earlier_steps(tmp_path: Path) -> None:
    from tooltune.training.diagnostics import truncate_metrics

    path = tmp_path / "metrics.jsonl"
    recs = [{"stage": "sft", "step": 9}] + [{"stage": "grpo", "step": s} for s in (1, 2, 3, 4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"stage": "grpo", "st')
    assert truncate_metrics(path, "grpo", 2) == 3
    assert [json.loads(x) for x in path.read_text().splitlines()] == recs[:3]
