"""Composite rewards, presets, the TRL batched adapter and the verl entry point."""

import json
import pickle

import pytest

from tooltune.config import UnknownName
from tooltune.integrations.trl.reward import TRLRewardFunction
from tooltune.integrations.verl.reward import compute_score
from tooltune.prompts import render_answer
from tooltune.rewards import PRESETS, CompositeReward
from tooltune.schema import ToolCall

GOLD = [ToolCall("get_weather", {"city": "Paris"})]
GOLD_JSON = json.dumps([c.to_dict() for c in GOLD])
GOOD = render_answer(GOLD, "tool_n1", reasoning="Paris weather.")
WRONG = render_answer([ToolCall("get_weather", {"city": "Rome"})], "tool_n1", reasoning="Rome?")
# ToolRL's own format: one JSON object per line with "parameters"
TOOLRL_GOOD = (
    '<think>Paris weather.</think>\n<tool_call>\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n'
    "</tool_call>"
)


def test_weighted_sum_and_logged_only_components():
    c = CompositeReward({"binary": 2.0, "fine_grained": 0.5, "format": 0.0})
    assert c(GOOD, GOLD) == {"binary": 1.0, "fine_grained": 1.0, "format": 1.0, "score": 2.5}
    # wrong value: binary 0, fine-grained 0.2 + 0.2, format 1 (logged, weight 0)
    assert c(WRONG, GOLD) == pytest.approx({"binary": 0.0, "fine_grained": 0.4, "format": 1.0, "score": 0.2})
    assert c.range == (0.0, 2.5)


def test_parameters_flat_or_per_component_and_typos_fail():
    c = CompositeReward(["binary", "fine_grained"], require_format=False, fine_grained={"name_weight": 0.5})
    assert c.rewards["binary"].require_format is False
    assert c.rewards["fine_grained"].name_weight == 0.5
    with pytest.raises(ValueError, match="taken by none"):
        CompositeReward({"binary": 1.0}, tua=0.3)
    with pytest.raises(UnknownName, match=r"unknown reward 'binray' \(did you mean binary\?\); registered:"):
        CompositeReward({"binray": 1.0})
    with pytest.raises(ValueError, match="template"):
        CompositeReward({"binary": 1.0}, template="nope")


def test_presets_build_and_r2if_needs_a_student():
    for name in PRESETS:
        if name == "r2if":
            with pytest.raises(ValueError, match="student"):
                CompositeReward.from_preset(name)
        else:
            assert CompositeReward.from_preset(name).weights == PRESETS[name]["components"]
    with pytest.raises(UnknownName, match=r"reward: unknown reward preset 'tool_n2' \(did you mean tool_n1"):
        CompositeReward.from_preset("tool_n2")
    toolrl = CompositeReward.from_preset("toolrl")
    assert toolrl(TOOLRL_GOOD, GOLD)["score"] == 4.0
    assert toolrl(GOOD, GOLD)["score"] == 1.0 - 3.0  # Tool-N1's JSON list is not ToolRL's format


def test_from_training_config_fields():
    from tooltune.training.config import RewardConfig

    cfg = RewardConfig(components={"binary": 1.0}, template="", require_format=False)
    c = CompositeReward.from_config(cfg, default_template="tool_n1")
    assert c.template == "tool_n1" and c.rewards["binary"].require_format is False
    # a config without any component that takes require_format still builds
    assert CompositeReward.from_config({"components": {"format": 1.0}}).weights == {"format": 1.0}


def test_composite_pickles():
    c = CompositeReward.from_preset("toolrl")
    clone = pickle.loads(pickle.dumps(TRLRewardFunction(c)))
    assert clone.composite(TOOLRL_GOOD, GOLD) == c(TOOLRL_GOOD, GOLD)
    assert clone.composite(GOOD, GOLD) == c(GOOD, GOLD)


def test_trl_adapter_batched_signature_logs_every_component():
    metrics, extra = [], {}
    fn = TRLRewardFunction(CompositeReward({"binary": 1.0, "format": 0.0}))
    assert fn.__name__ == "tooltune"
    prompts = [[{"role": "user", "content": "weather in Paris?"}]] * 3
    completions = [
        [{"role": "assistant", "content": GOOD}],
        [{"role": "assistant", "content": WRONG}],
        "junk",
    ]
    # exactly how TRL 1.16 GRPOTrainer._calculate_rewards calls a reward function
    out = fn(
        prompts=prompts,
        completions=completions,
        completion_ids=[[1], [2], [3]],
        answer=[GOLD_JSON] * 3,
        sample_id=["s"] * 3,
        category=["simple"] * 3,
        tools=["[]"] * 3,
        meta=["{}"] * 3,
        prompt_index=[0] * 3,
        trainer_state=object(),
        log_extra=lambda col, vals: extra.__setitem__(col, vals),
        log_metric=lambda name, value: metrics.append((name, value)),
    )
    assert out == [1.0, 0.0, 0.0]
    assert dict(metrics) == pytest.approx({"rewards/binary/mean": 1 / 3, "rewards/format/mean": 2 / 3})
    assert extra == {"reward_binary": [1.0, 0.0, 0.0], "reward_format": [1.0, 1.0, 0.0]}
    with pytest.raises(ValueError, match="answer"):
        fn(prompts=prompts, completions=completions)


def test_verl_compute_score(monkeypatch):
    assert compute_score("tooltune", GOOD, GOLD_JSON, {}) == {"binary": 1.0, "format": 1.0, "score": 1.0}
    assert compute_score("tooltune", GOOD, GOLD_JSON, None)["score"] == 1.0
    res = compute_score("tooltune", WRONG, GOLD_JSON, {"reward": "tool_n1_fine_grained"})
    assert res["score"] == pytest.approx(0.4)
    r2if = render_answer(GOLD, "r2if")
    cfg = {"components": {"binary": 3.0}, "template": "r2if"}
    assert compute_score("tooltune", r2if, GOLD_JSON, {"reward": cfg})["score"] == 3.0
    monkeypatch.setenv("TOOLTUNE_REWARD", "toolrl")
    assert compute_score("tooltune", TOOLRL_GOOD, GOLD_JSON, {})["score"] == 4.0
    monkeypatch.setenv("TOOLTUNE_REWARD", json.dumps({"components": {"binary": 2.0}}))
    assert compute_score("tooltune", GOOD, GOLD_JSON, {})["score"] == 2.0
    with pytest.raises(UnknownName, match=r"TOOLTUNE_REWARD: unknown reward preset 'toolrll' \(did you mean"):
        compute_score("tooltune", GOOD, GOLD_JSON, {"reward": "toolrll"})


class ConstantEncoder:
    """Every text embeds to the same unit vector: every similarity is 1."""

    def encode(self, texts):
        import numpy as np

        return np.ones((len(texts), 4)) / 2.0


class HalfRightStudent:
    """Continuations: the first of each pair right; free answers: always wrong."""

    name = "half"

    def __init__(self):
        self.requests = []

    def generate(self, requests):
        self.requests += requests
        right = json.dumps([c.to_dict() for c in GOLD]) + "</tool>"
        return [[right, "[]</tool>"] * (r.n // 2) if r.prefix else ["nothing"] * r.n for r in requests]


def test_r2if_preset_through_the_trl_adapter():
    student = HalfRightStudent()
    r2if = CompositeReward.from_preset(
        "r2if", cer={"student": student, "k": 2}, smv={"encoder": ConstantEncoder()}
    )
    text = render_answer(GOLD, "r2if")
    prompts = [[{"role": "user", "content": "weather in Paris?"}]]
    metrics = {}
    out = TRLRewardFunction(r2if)(
        prompts=prompts,
        completions=[text],
        answer=[GOLD_JSON],
        sample_id=["p"],
        tools=[
            json.dumps(
                [
                    {
                        "name": "get_weather",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                    }
                ]
            )
        ],
        log_metric=metrics.__setitem__,
    )
    # binary 1; CER: v = 1/2, v_base = 0; SMV: similarities 1 -> r(city) = (1 + 1 + 1) / 3 = 1
    assert out == pytest.approx([3 * 1.0 + 0.5 + 1.0])
    assert metrics == pytest.approx(
        {"rewards/binary/mean": 1.0, "rewards/cer/mean": 0.5, "rewards/smv/mean": 1.0}
    )
    assert all(r.messages == prompts[0] for r in student.requests)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"components": {"fine_grained": 1.0}, "require_format": False},
         "parameter(s) ['require_format'] are taken by none of the components ['fine_grained']"),
        ({"components": {"binry": 1.0}}, "reward.components: unknown reward 'binry' (did you mean binary?)"),
        ({"components": {"binary": "heavy"}}, "reward.components.binary: the weight must be a number"),
        ({"components": {"binary": 1.0}, "params": {"binary": {"tau": 0.3}}},
         "reward 'binary' takes no parameter(s) ['tau']"),
    ],
)
def test_training_and_verl_accept_or_refuse_a_reward_config_alike(spec, message):
    """One construction (`tooltune.rewards.build_reward`): training's config validation and the verl
    entry point refuse the same configurations with the same message."""
    from tooltune.config import ConfigError
    from tooltune.rewards import build_reward
    from tooltune.training.config import RewardConfig, load_config

    overrides = {f"reward.{k}": json.dumps(v) if isinstance(v, dict) else v for k, v in spec.items()}
    refusals = [
        lambda: load_config(None, overrides),
        lambda: CompositeReward.from_config(spec),
        lambda: build_reward(RewardConfig(**spec), "tool_n1"),
        lambda: compute_score("tooltune/unit", GOOD, GOLD_JSON, {"reward": spec}),
    ]
    for refuse in refusals:
        with pytest.raises(ConfigError) as caught:
            refuse()
        assert message in str(caught.value)


def test_training_and_verl_build_the_same_composition():
    from tooltune.rewards import build_reward
    from tooltune.training.config import RewardConfig, load_config

    spec = {"components": {"correctness": 1.0, "format": 0.0}, "require_format": False, "template": "r2if"}
    trained = build_reward(load_config(None, {"reward.components": "{correctness: 1, format: 0}",
                                              "reward.require_format": False,
                                              "data.template": "r2if"}).reward, "r2if")
    for built in (trained, CompositeReward.from_config(spec), build_reward(RewardConfig(**spec), "r2if")):
        assert built.weights == {"correctness": 1.0, "format": 0.0} and built.template == "r2if"
        assert built.rewards["correctness"].require_format is False
    answer = render_answer(GOLD, "r2if")
    assert compute_score("tooltune/unit", answer, GOLD_JSON, {"reward": spec}) == trained(answer, GOLD)
