"""`make verl-check`: the verl presets and tooltune's verl reward path, checked by verl 0.9.1 itself.

Runs in the separate verl environment (`.venv-verl`, pinned in requirements/verl.txt), from the
repository root, offline, on CPU:

(a) config: for every configs/verl/*.yaml, the `key=value` overrides that
    `python -m tooltune.integrations.verl.launch` prints are composed by Hydra onto verl's own
    `ppo_trainer` config, as `python -m verl.trainer.main_ppo` does; then verl's `validate_config`
    runs, the actor and rollout sections are built into verl's config dataclasses, the interpolations
    are resolved, and every override must read back with the preset's value.
(b) reward: per preset, synthetic samples (`tooltune.data.synthetic`) are exported with the preset's
    template and history settings to verl parquet (what `tooltune data export --format verl` does),
    loaded by verl's `RLHFDataset` (with its overlong-prompt filter) under a tokenizer trained here,
    and scored by verl's reward loop (`RewardLoopWorker` -> the "naive" reward manager ->
    `reward.custom_reward_function` = tooltune/integrations/verl/reward.py:compute_score). Each gold
    completion must score the reward's maximum; each completion calling a tool that does not exist must score
    less. R2IF's CER and SMV components need a student model and a sentence-embedding model, which
    this environment does not hold: its reward is checked on its binary term (weight 3) in its own
    template.

(c) agentic: environment tasks (synthetic_chain, generated here) are exported as
    agentic verl rows with their tool config (`tooltune data export --format verl`); verl's
    `initialize_tools_from_config` instantiates `tooltune.integrations.verl.tools.EnvironmentTool`
    from that config, verl's `RLHFDataset` reads the parquet (agent_name, tools_kwargs), and verl's own
    `ToolAgentLoop.run` plays each task, only its LLM server replaced by scripted replies (one call a
    turn, then an answer without calls: `ScriptedServer`): the gold calls score 1.0 through verl's reward
    loop and `outcome_score`, a wrong trajectory 0.0, and a row whose task does not load is a failed
    step (no exception); the same tools driven directly under one instance id are judged by
    calc_reward; the verl command of docs/integrations.md is composed onto verl's config and validated.
    (The ``bfcl`` and ``mcp`` environments need bfcl-eval and the `mcp` SDK, which this environment does
    not hold; tests/test_integrations_verl_sessions.py runs the same lifecycle on them without verl.)

Exit status 0 when everything passes; otherwise the failures are listed and the status is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tooltune from this checkout (verl loads compute_score by file path too)

import yaml  # noqa: E402

from tooltune.integrations.verl.launch import VERL_ENTRY, launch_command  # noqa: E402

# Reward components whose models this environment does not hold (see the module docstring).
OFFLINE_UNAVAILABLE = ("cer", "smv")


class ScriptedServer:
    """verl's LLM server client (`generate`, as `ToolAgentLoop` calls it) answering with scripted replies:
    each call returns the next reply's token ids, and a plain answer once they run out."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tokenizer, self.replies = tokenizer, list(replies)

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        text = self.replies.pop(0) if self.replies else "done"
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return TokenOutput(token_ids=ids, stop_reason="completed")


def overrides_of(settings: dict[str, Any], train_files: str, val_files: str) -> list[str]:
    """The hydra overrides of the command `tooltune.integrations.verl.launch` prints for `settings` (1 node x
    8 GPUs)."""
    tokens = shlex.split(launch_command(settings, train_files, val_files).replace("\\\n", " "))
    return tokens[tokens.index(VERL_ENTRY) + 1 :]


def compose(overrides: list[str]) -> Any:
    """verl's trainer config with `overrides`, composed as `verl.trainer.main_ppo` does."""
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=overrides)


def validated(overrides: list[str]) -> tuple[Any, Any]:
    """verl's config with `overrides`, through validate_config; with its rollout section as verl's
    dataclass."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    config = compose(overrides)
    validate_config(
        config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )
    omega_conf_to_dataclass(config.algorithm)
    return config, omega_conf_to_dataclass(config.actor_rollout_ref.rollout)


def check_config(name: str, settings: dict[str, Any]) -> Any:
    """(a): compose, validate_config, dataclasses, resolve, read back. Returns the composed config."""
    from omegaconf import OmegaConf

    config, _ = validated(overrides_of(settings, "train.parquet", "val.parquet"))
    resolved = OmegaConf.create(OmegaConf.to_container(config, resolve=True))  # as verl's TaskRunner does
    for key, want in settings["overrides"].items():
        got = OmegaConf.select(resolved, key)
        got = OmegaConf.to_container(got) if OmegaConf.is_config(got) else got
        if got != want:
            raise AssertionError(f"{key}: verl's config holds {got!r}, the preset {want!r}")
    for section in ("ref", "rollout"):  # the log-prob passes follow the actor's dynamic batch sizes
        if resolved.actor_rollout_ref[section].log_prob_use_dynamic_bsz is not True:
            raise AssertionError(f"actor_rollout_ref.{section}.log_prob_use_dynamic_bsz is not true")
    return config


def train_tokenizer_dir(texts: list[str], out: Path) -> Path:
    """A byte-level BPE tokenizer with a chat template, trained on `texts` and saved (no hub)."""
    from tooltune.models.tokenizer import train_tokenizer

    tok = train_tokenizer(texts, vocab_size=600)
    tok.save_pretrained(str(out))
    return out


def reward_spec(settings: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """The TOOLTUNE_REWARD checked for a preset and the score its gold completions must reach."""
    spec = json.loads(settings["env"]["TOOLTUNE_REWARD"])
    comps = {k: w for k, w in spec["components"].items() if k not in OFFLINE_UNAVAILABLE}
    spec = {**spec, "components": comps, "params": {}}
    return spec, float(sum(comps.values()))


def reward_loop_scores(worker: Any, rows: list[tuple[dict[str, Any], str]],
                       tool_fields: list[dict[str, Any]] | None = None) -> tuple[list[dict], list[float]]:
    """verl's reward loop on (dataset row, response text) pairs, as the trainer hands it a batch (with the
    agent loop's ``tool_extra_fields`` when given); returns its outputs and their scores."""
    import numpy as np
    import torch
    from verl import DataProto
    from verl.utils.ray_utils import get_event_loop

    tok = worker.input_tokenizer
    prompt_ids = [
        tok.encode(tok.apply_chat_template(r["raw_prompt"], add_generation_prompt=True, tokenize=False))
        for r, _ in rows
    ]
    response_ids = [tok.encode(text + tok.eos_token, add_special_tokens=False) for _, text in rows]
    plen, rlen, pad = max(map(len, prompt_ids)), max(map(len, response_ids)), tok.pad_token_id
    prompts = torch.full((len(rows), plen), pad, dtype=torch.long)
    responses = torch.full((len(rows), rlen), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), plen + rlen), dtype=torch.long)
    for j, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        prompts[j, plen - len(p) :] = torch.tensor(p)  # prompts left-padded, responses right-padded
        responses[j, : len(r)] = torch.tensor(r)
        mask[j, plen - len(p) : plen + len(r)] = 1
    non_tensors = {
        key: np.array([r[key] for r, _ in rows], dtype=object)
        for key in ("data_source", "reward_model", "extra_info", "raw_prompt")
    }
    if tool_fields is not None:
        non_tensors["tool_extra_fields"] = np.array(tool_fields, dtype=object)
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": mask,
        },
        non_tensors=non_tensors,
    )
    outputs = get_event_loop().run_until_complete(worker.compute_score_batch(data))
    scores = [float(o["reward_score"]) for o in outputs]
    rm_scores = type(worker.reward_manager).assemble_rm_scores(data, scores)
    if not torch.allclose(rm_scores.sum(dim=1), torch.tensor(scores)):
        raise AssertionError("assemble_rm_scores does not carry the scores")
    return outputs, scores


def check_reward(name: str, settings: dict[str, Any], work: Path, n_samples: int) -> str:
    """(b): export, RLHFDataset, reward loop; returns a one-line summary."""
    from verl.experimental.reward_loop import RewardLoopWorker
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from tooltune.data.export import export
    from tooltune.data.synthetic import SynthConfig, write
    from tooltune.prompts import PromptControls
    from tooltune.prompts.render import render_target
    from tooltune.prompts.templates import render_answer
    from tooltune.schema import ToolCall, read_jsonl
    from tooltune.training.config import load_config

    preset = load_config(REPO / settings["source"])
    template = preset.reward.template or preset.data.template
    folder = work / name
    folder.mkdir(parents=True)
    jsonl, parquet = folder / "samples.jsonl", folder / "train.parquet"
    write(SynthConfig(n=n_samples, seed=0), str(jsonl))
    export(
        [str(jsonl)],
        "verl",
        str(parquet),
        PromptControls(template=template, history=preset.data.history,
                       keep_reasoning=preset.data.keep_reasoning),
    )
    samples = {s.id: s for s in read_jsonl(str(jsonl))}
    gold = {sid: render_target(s, template) for sid, s in samples.items()}
    wrong = render_answer([ToolCall("no_such_tool", {})], template)

    spec, best = reward_spec(settings)
    os.environ["TOOLTUNE_REWARD"] = json.dumps(spec)
    import pyarrow.parquet as pq

    prompts_text = [
        m["content"] for msgs in pq.read_table(parquet).column("prompt").to_pylist() for m in msgs
    ]
    tok_dir = train_tokenizer_dir([*prompts_text, *gold.values(), wrong], folder / "tokenizer")
    config = compose(
        overrides_of(settings, str(parquet), str(parquet))
        + [f"actor_rollout_ref.model.path={tok_dir}", "data.filter_overlong_prompts_workers=1"]
    )
    worker = RewardLoopWorker(config)  # loads the tokenizer and compute_score the way verl's workers do
    tok = worker.input_tokenizer
    dataset = RLHFDataset(data_files=[str(parquet)], tokenizer=tok, config=config.data)
    if len(dataset) != len(samples):
        raise AssertionError(f"RLHFDataset kept {len(dataset)} of {len(samples)} rows")

    rows, expected = [], []
    for i in range(len(dataset)):
        row = dataset[i]
        sid = row["extra_info"]["sample_id"]
        for text, want_best in ((gold[sid], True), (wrong, False)):
            rows.append((row, text))
            expected.append(want_best)

    outputs, scores = reward_loop_scores(worker, rows)
    bad = [
        f"{rows[j][0]['extra_info']['sample_id']} ({'gold' if want else 'wrong'}): {s}"
        for j, (s, want) in enumerate(zip(scores, expected))
        if (abs(s - best) > 1e-9 if want else s >= best)
    ]
    if bad:
        raise AssertionError(f"scores off (gold must be {best}, wrong below it): " + "; ".join(bad[:5]))
    comps = sorted(k for k in outputs[0]["reward_extra_info"] if k != "score")
    return (
        f"{len(dataset)} rows, template {template}, components {comps}: "
        f"gold {best:g}, wrong {max(s for s, w in zip(scores, expected) if not w):g}"
    )


def gold_calls(task: Any) -> list[dict[str, Any]]:
    """The calls that solve an environment task: synthetic_chain's goal, BFCL's ground-truth turns."""
    env = task.meta["env"]
    if env["name"] == "bfcl":
        return [c for turn in env["ground_truth"] for c in turn]
    return list(env["goal"])


def doc_overrides() -> list[str]:
    """The overrides of the `verl.trainer.main_ppo` command in docs/integrations.md."""
    text = (REPO / "docs" / "integrations.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in text.split("```bash\n")[1:]]
    block = next(b for b in blocks if VERL_ENTRY in b).replace("\\\n", " ")
    line = next(x for x in block.splitlines() if VERL_ENTRY in x)
    tokens = shlex.split(line)
    return tokens[tokens.index(VERL_ENTRY) + 1 :]


def check_doc_command() -> str:
    """(c): the documented verl command's overrides composed onto verl's config and validated."""
    overrides = doc_overrides()
    _, rollout = validated(overrides)
    if not rollout.multi_turn.enable or not rollout.multi_turn.tool_config_path:
        raise AssertionError("the documented command does not enable verl's multi-turn tool loop")
    return f"docs/integrations.md's verl command: {len(overrides)} overrides pass validate_config"


def check_agentic(work: Path, n_tasks: int) -> str:
    """(c): agentic export -> verl's tool config loader, RLHFDataset, the tool lifecycle, the reward."""
    import asyncio

    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.experimental.reward_loop import RewardLoopWorker
    from verl.tools.tool_registry import initialize_tools_from_config
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.utils.tokenizer import hf_tokenizer

    from tooltune.data.export import export, tool_config_path
    from tooltune.data.synthetic.chain_tasks import generate_chain_tasks
    from tooltune.integrations.verl.config import OUTCOME_FIELD
    from tooltune.integrations.verl.sessions import outcome_score
    from tooltune.prompts import PromptControls
    from tooltune.schema import write_jsonl

    folder = work / "agentic"
    folder.mkdir(parents=True)
    tasks = generate_chain_tasks(n_tasks, seed=0, split="train")
    jsonl, parquet = folder / "tasks.jsonl", folder / "tasks.parquet"
    write_jsonl(tasks, str(jsonl))
    export([str(jsonl)], "verl", str(parquet), PromptControls(template="native"))
    tools = {tool.name: tool for tool in initialize_tools_from_config(tool_config_path(str(parquet)))}
    offered = {t.name for task in tasks for t in task.tools}
    if set(tools) != offered or {type(t).__name__ for t in tools.values()} != {"EnvironmentTool"}:
        raise AssertionError(f"the tool config declares {sorted(tools)}, the tasks offer {sorted(offered)}")
    texts = [m["content"] for task in tasks for m in task.messages]
    tok_dir = train_tokenizer_dir(texts, folder / "tokenizer")
    tok = hf_tokenizer(str(tok_dir))
    config = compose([f"data.train_files={parquet}", f"data.val_files={parquet}",
                      "data.filter_overlong_prompts_workers=1", f"actor_rollout_ref.model.path={tok_dir}",
                      "data.max_response_length=4096", "actor_rollout_ref.rollout.multi_turn.enable=True",
                      "actor_rollout_ref.rollout.multi_turn.format=hermes",
                      "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=8",
                      "reward.custom_reward_function.path=tooltune/integrations/verl/sessions.py",
                      "reward.custom_reward_function.name=outcome_score"])
    worker = RewardLoopWorker(config)  # loads outcome_score by file path, as verl's workers do
    dataset = RLHFDataset(data_files=[str(parquet)], tokenizer=tok, config=config.data)
    if len(dataset) != len(tasks):
        raise AssertionError(f"RLHFDataset kept {len(dataset)} of {len(tasks)} rows")
    by_id = {task.id: task for task in tasks}

    def trajectory(row: dict[str, Any], calls: list[dict[str, Any]]) -> tuple[dict, str]:
        """verl's `ToolAgentLoop.run` on `row`, the model scripted to make `calls` one a turn and then
        answer: the trajectory's fields (what the agent loop hands the reward) and its tool messages."""
        replies = ["<tool_call>\n" + json.dumps(call) + "\n</tool_call>" for call in calls] + ["done"]
        server, offered = ScriptedServer(tok, replies), ToolListWrap(list(tools.values()))
        agent = ToolAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tok,
                              processor=None, dataset_cls=RLHFDataset,
                              data_config=DictConfigWrap(config.data), tools=offered)
        out = agent.loop.run_until_complete(agent.run(  # the loop the agent bound its executor calls to
            sampling_params={}, raw_prompt=row["raw_prompt"], tools_kwargs=row["tools_kwargs"],
            extra_info=row["extra_info"]))
        if out.num_turns != 2 * len(calls) + 2:  # the prompt, each call and its tool message, the answer
            raise AssertionError(f"the agent loop ran {out.num_turns} turns for {len(calls)} calls")
        tool_tokens = [t for t, m in zip(out.response_ids, out.response_mask) if m == 0]
        return out.extra_fields, tok.decode(tool_tokens)

    async def direct(task: Any, calls: list[dict[str, Any]]) -> float:
        for call in calls:
            await tools[call["name"]].create("episode", create_kwargs={"task": task.to_json()})
            await tools[call["name"]].execute("episode", call["arguments"])
        score = await tools[calls[0]["name"]].calc_reward("episode")
        await tools[calls[0]["name"]].release("episode")
        return score

    loop = asyncio.new_event_loop()
    problems, batch, fields, expected = [], [], [], []
    for i in range(len(dataset)):
        row = dataset[i]
        task = by_id[row["extra_info"]["sample_id"]]
        if row.get("agent_name") != "tool_agent" or sorted(row["extra_info"]["tool_selection"]) != sorted(
                t.name for t in task.tools):
            problems.append(f"{task.id}: agent_name / tool_selection not as verl reads them")
        gold = gold_calls(task)
        gold_fields, _ = trajectory(row, gold)
        wrong_fields, wrong_text = trajectory(row, gold[:1] * 2 + [
            {"name": gold[0]["name"], "arguments": {"no_such_argument": 1}}])
        broken = {**row, "tools_kwargs": {"tooltune": {"create_kwargs": {"task": "{cut"}}}}
        _, broken_text = trajectory(broken, gold[:1])
        direct_score = loop.run_until_complete(direct(task, gold))
        # one extra_info per rollout, as the agent loop's per-trajectory call to the reward worker has it
        batch += [({**row, "extra_info": dict(row["extra_info"])}, text) for text in ("done", "done", "")]
        fields += [gold_fields, wrong_fields, {}]
        expected += [1.0, 0.0, outcome_score("", "", None, row["extra_info"])]  # no step: the initial state
        if direct_score != 1.0:
            problems.append(f"{task.id}: the gold calls score {direct_score} driven directly")
        if "unknown argument" not in wrong_text:
            problems.append(f"{task.id}: a call with a wrong argument answers {wrong_text[-120:]}")
        if "did not load" not in broken_text:
            problems.append(f"{task.id}: a broken task answers {broken_text[:120]}")
        if OUTCOME_FIELD in row["extra_info"]:
            problems.append(f"{task.id}: the outcome leaked into the dataset row")
    loop.close()
    _, scores = reward_loop_scores(worker, batch, fields)
    if scores != expected or expected[2::3] != [0.0] * len(dataset):
        problems.append(f"verl's reward loop scores {scores}, expected {expected}")
    if problems:
        raise AssertionError("; ".join(problems[:5]))
    return (f"{len(dataset)} task rows, {len(tools)} EnvironmentTools from the generated config, played by "
            f"verl's ToolAgentLoop; verl's reward loop (outcome_score): gold trajectories {scores[0::3]}, "
            f"wrong {scores[1::3]}, no call {scores[2::3]}; broken tasks: failed steps")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/verl_check.py", description=__doc__.split("\n")[0])
    p.add_argument("presets", nargs="*", help="configs/verl/*.yaml (default: all)")
    p.add_argument("--samples", type=int, default=12, help="synthetic samples per preset")
    p.add_argument("--tasks", type=int, default=4, help="agentic check: environment tasks")
    p.add_argument("--only-agentic", action="store_true", help="run the agentic checks (c) alone")
    args = p.parse_args(argv)
    os.chdir(REPO)  # reward.custom_reward_function.path is relative to the repository root
    paths = [] if args.only_agentic else (
        [Path(x) for x in args.presets] or sorted((REPO / "configs" / "verl").glob("*.yaml")))
    failures = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="verl-check-") as tmp:
        os.environ.update(
            HF_HUB_OFFLINE="1",  # no hub: the tokenizer is trained here
            HF_DATASETS_CACHE=str(Path(tmp) / "hf-datasets"),  # verl reads parquet through `datasets`
            HF_DATASETS_DISABLE_PROGRESS_BARS="1",
            TOKENIZERS_PARALLELISM="false",
        )
        warnings.filterwarnings("ignore", message="Disabled critic")  # GRPO has no critic, as intended
        import verl

        print(f"verl {verl.__version__} (imported in {time.time() - t0:.1f} s)")
        for path in paths:
            name = path.stem
            settings = yaml.safe_load(path.read_text(encoding="utf-8"))
            for part in ("config", "reward"):
                t = time.time()
                try:
                    if part == "config":
                        check_config(name, settings)
                        msg = "verl's defaults + these overrides pass validate_config"
                    else:
                        msg = check_reward(name, settings, Path(tmp), args.samples)
                    print(f"ok    {name:30s} {part:6s} {msg} ({time.time() - t:.1f} s)")
                except Exception as e:  # report every preset, then fail
                    failures.append(f"{name} {part}: {type(e).__name__}: {e}")
                    print(f"FAIL  {name:30s} {part:6s} {type(e).__name__}: {e}")
        for part, check in (("agentic", lambda: check_agentic(Path(tmp), args.tasks)),
                            ("doc", check_doc_command)):
            t = time.time()
            try:
                print(f"ok    {'environment tasks':30s} {part:6s} {check()} ({time.time() - t:.1f} s)")
            except Exception as e:  # reported with the presets' results
                failures.append(f"{part}: {type(e).__name__}: {e}")
                print(f"FAIL  {'environment tasks':30s} {part:6s} {type(e).__name__}: {e}")
    print(f"verl-check: {len(paths)} presets and the agentic checks in {time.time() - t0:.0f} s")
    print(f"{len(paths) * 2 + 2 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
