"""tooltune environments inside a plain `trl.GRPOTrainer(environment_factory=...)` (TRL's own loop, no
tooltune trainer), and the generated classes' tools, rows and refusals.

The tiny model's weights are random, so its policy is steered with TRL's own `generation_kwargs`
(transformers' ``sequence_bias``, growing with the prefix length) to write one scripted completion: the
task's tool calls in the Qwen2.5 format. TRL parses them with the response template of that chat template
(the tiny tokenizer gets TRL's bundled ``qwen2_5`` template: TRL parses tool calls only for the chat
template families it knows), runs them on the environment's methods and scores each rollout with the
environment's ``get_reward``.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tooltune.config import UnknownName
from tooltune.data.mcp_tasks import task_from_record
from tooltune.data.synthetic.chain_tasks import generate_chain_tasks
from tooltune.environments.mcp.client import close_all
from tooltune.environments.mcp.data import McpServer
from tooltune.environments.mcp.environment import McpSettings
from tooltune.integrations.trl import (
    environment_class,
    environment_factories,
    environment_rows,
    final_answer_reward,
    mcp_environment_class,
)
from tooltune.schema import Sample, SchemaError, ToolSpec

pytest.importorskip("trl")

NOTES = [sys.executable, "-m", "tooltune.environments.mcp.notes"]


def _tokenizer(model_dir: Path) -> Any:
    import trl  # deferred: heavy
    from transformers import AutoTokenizer  # deferred: heavy

    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    return tok


def _scripted(tok: Any, calls: list[dict[str, Any]]) -> tuple[list, int]:
    """`sequence_bias` that makes any model write `calls` (Qwen2.5 tool-call blocks) and stop."""
    text = "\n".join("<tool_call>\n" + json.dumps(c) + "\n</tool_call>" for c in calls) + "<|im_end|>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return [[ids[: i + 1], 50.0 * (i + 1)] for i in range(len(ids))], len(ids)


def _train(model_dir: Path, rows: list[dict], factory: Any, calls: list[dict], tmp_path: Path) -> Any:
    from datasets import Dataset  # deferred: heavy
    from transformers import AutoModelForCausalLM  # deferred: heavy
    from trl import GRPOConfig, GRPOTrainer  # deferred: heavy

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tok = _tokenizer(model_dir)
    bias, n = _scripted(tok, calls)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2,
                      max_steps=2, max_completion_length=n + 24, use_cpu=True, bf16=False,
                      gradient_checkpointing=False, report_to="none", logging_steps=1, save_strategy="no",
                      max_tool_calling_iterations=1, generation_kwargs={"sequence_bias": bias}, seed=0)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir), args=args,
                          train_dataset=Dataset.from_list(rows), processing_class=tok,
                          environment_factory=factory)
    trainer.train()
    return trainer


def _steps(trainer: Any) -> list[dict]:
    return [h for h in trainer.state.log_history if "reward" in h]


def test_grpo_trains_on_the_synthetic_environment_with_its_reward(tiny_model_dir: Path, tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture):
    task = generate_chain_tasks(1, seed=0, split="train")[0]
    good = environment_rows([task])[0]
    broken = {**good, "task": good["task"][:40]}  # a task line cut short: it cannot load
    caplog.set_level(logging.WARNING, logger="tooltune.integrations.trl")
    trainer = _train(tiny_model_dir, [good, broken], environment_factories([task]),
                     task.meta["env"]["goal"], tmp_path)
    steps = _steps(trainer)
    assert len(steps) == 2
    # each step is one prompt x 2 generations: the intact task reaches its goal, the broken one scores 0
    assert sorted(s["rewards/SyntheticChainEnvironment/mean"] for s in steps) == [0.0, 1.0]
    assert all(s["tools/call_frequency"] == 2.0 and s["tools/failure_frequency"] == 0.0 for s in steps)
    assert "the row's task did not load" in caplog.text


def test_grpo_trains_on_bfcl_multi_turn_api_classes(tiny_model_dir: Path, tmp_path: Path):
    pytest.importorskip("bfcl_eval")
    from tooltune.data.synthetic.bfcl_tasks import generate_bfcl_tasks

    def gold_of(task: Sample) -> list[dict]:
        return [c for turn in task.meta["env"]["ground_truth"] for c in turn]

    task = min(generate_bfcl_tasks(8, seed=0, split="train"), key=lambda t: len(gold_of(t)))  # a short one
    gold = gold_of(task)
    factories = environment_factories([task])
    trainer = _train(tiny_model_dir, environment_rows([task]) * 2, factories, gold, tmp_path)
    steps = _steps(trainer)
    assert [s["rewards/BfclEnvironment/mean"] for s in steps] == [1.0, 1.0]  # BFCL's state checker agrees
    assert all(s["tools/call_frequency"] == float(len(gold)) for s in steps)


def test_grpo_trains_on_the_mcp_notes_server(tiny_model_dir: Path, tmp_path: Path):
    server = McpServer.parse(NOTES)
    cls = mcp_environment_class(NOTES, exclude=["reset_notes"])
    tools = [cls.tool_methods[m] for m in sorted(cls.tool_methods)]
    assert {t.tool for t in tools} == {"add_note", "get_note", "list_notes", "append_to_note", "delete_note"}
    add = {"name": "add_note", "arguments": {"title": "groceries", "text": "milk"}}
    task = task_from_record({"id": "notes-1", "prompt": "Save a note titled groceries that says milk",
                             "check": {"kind": "calls", "calls": [add]}}, server, cls.tool_specs)
    try:
        trainer = _train(tiny_model_dir, environment_rows([task]) * 2, cls, [add], tmp_path)
    finally:
        close_all()
    steps = _steps(trainer)
    assert [s["rewards/McpEnvironment/mean"] for s in steps] == [1.0, 1.0]
    assert all(s["tools/call_frequency"] == 1.0 for s in steps)


def _spec(name: str, **properties: Any) -> ToolSpec:
    return ToolSpec(name, f"Tool {name}.", {"type": "object", "properties": properties,
                                            "required": list(properties)[:1]})


def test_generated_methods_carry_the_task_schema_and_map_names():
    from transformers.utils import get_json_schema  # deferred: heavy

    tools = [_spec("send-mail", to={"type": "string", "description": "Recipient."},
                   **{"from": {"type": "string"}, "cc list": {"type": "array", "items": {"type": "string"}}}),
             _spec("reset", hard={"type": "boolean"})]
    cls = environment_class("synthetic_chain", tools)
    env = cls()
    public = [n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")]
    assert sorted(public) == ["get_reward", "reset", "send_mail", "tool_reset"]
    schema = get_json_schema(env.send_mail)["function"]
    assert schema["name"] == "send_mail" and schema["description"] == "Tool send-mail."
    assert schema["parameters"]["properties"]["to"] == {"type": "string", "description": "Recipient."}
    assert schema["parameters"]["properties"]["cc_list"]["type"] == "array"
    assert schema["parameters"]["required"] == ["to"]
    assert cls.tool_methods["send_mail"].arguments == {"to": "to", "from_": "from", "cc_list": "cc list"}


def test_calls_without_a_task_or_outside_the_task_are_failed_steps_not_exceptions():
    task = generate_chain_tasks(1, seed=0, split="train")[0]
    extra = _spec("not_in_the_task", x={"type": "string"})
    cls = environment_class("synthetic_chain", [*task.tools, extra])
    env = cls()
    assert "reset() was not called" in env.search_trains(origin="A", destination="B")
    assert env.reset(**environment_rows([task])[0]) is None
    assert "unknown tool" in env.not_in_the_task(x="y")
    assert "unknown argument" in env.search_trains(origin="A", destination="B", speed=3)
    assert env.get_reward() == 0.0 and env.calls_made == 2
    other = {**environment_rows([task])[0], "task": task.to_json().replace("synthetic_chain", "bfcl")}
    env.reset(**other)
    assert "not 'synthetic_chain'" in env.search_trains(origin="A", destination="B")
    assert env.get_reward() == 0.0


def test_a_dataset_without_the_task_column_is_refused_at_the_first_reset():
    task = generate_chain_tasks(1, seed=0, split="train")[0]
    env = environment_factories([task])["synthetic_chain"]()
    row = {k: v for k, v in environment_rows([task])[0].items() if k != "task"}
    with pytest.raises(SchemaError, match=r"^the training dataset: no 'task' column, which "
                                          r"SyntheticChainEnvironment reads \(it has: answer, environment, "
                                          r"prompt\); build the rows with tooltune.integrations.trl"):
        env.reset(**row)


def test_final_answer_reward_judges_with_the_last_assistant_text():
    pytest.importorskip("mcp")
    cls = mcp_environment_class(NOTES, exclude=["reset_notes"], reward="final_answer")
    assert not hasattr(cls, "get_reward")  # TRL then takes the reward from reward_funcs only
    add = {"name": "add_note", "arguments": {"title": "groceries", "text": "milk"}}
    task = task_from_record({"id": "notes-2", "prompt": "Save a note titled groceries that says milk",
                             "check": [{"kind": "calls", "calls": [add]},
                                       {"kind": "answer", "contains": ["saved groceries"]}]},
                            McpServer.parse(NOTES), cls.tool_specs)
    envs = [cls(), cls()]
    try:
        for env in envs:
            env.reset(**environment_rows([task])[0])
            assert json.loads(env.add_note(title="groceries", text="milk"))["saved"] == "groceries"
        completions = [
            [{"role": "assistant", "content": ""}, {"role": "tool", "content": "{}"},
             {"role": "assistant", "content": "I saved  Groceries."}],
            [{"role": "assistant", "content": "Done."}],
        ]
        assert final_answer_reward(completions=completions, environments=envs) == [1.0, 0.0]
        assert final_answer_reward(completions=["x"], environments=[object()]) == [None]
    finally:
        close_all()
    with pytest.raises(UnknownName, match="reward: unknown environment reward 'sometimes'; registered: "):
        environment_class("synthetic_chain", [], reward="sometimes")


def test_generated_classes_build_their_environments_with_the_settings_they_were_given():
    patient = environment_class("mcp", [], settings={"mcp": McpSettings(call_seconds=3.0)})
    assert patient()._environment.settings.call_seconds == 3.0
    assert environment_class("mcp", [])()._environment.settings == McpSettings()
