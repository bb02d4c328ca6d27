"""verl entry point: `compute_score(data_source, solution_str, ground_truth, extra_info)`.

Point verl at it with `reward.custom_reward_function.path=<this file>` and
`reward.custom_reward_function.name=compute_score`. It returns `{"score": ..., <component>: ...}`.

The reward composition comes, first match wins, from `extra_info["reward"]` (a preset name or a
mapping with the fields of `tooltune.training.config.RewardConfig`), the environment variable
`TOOLTUNE_REWARD` (a preset name, or a JSON object of those fields), or the `tool_n1` preset. The
template defaults to `extra_info["template"]` (then "tool_n1"); a template answered in the model's own
format is read as verl's rollout writes it back (`tooltune.prompts.resolve_native` with no chat template:
``hermes``), since this process never sees the tokenizer. `extra_info` fields `tools`, `meta`,
`sample_id`, `prompt` and `category` are passed to the components that need them (SMV, CER).
`make verl-check` scores exported samples through verl 0.9.1's own reward loop with this function.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from tooltune.prompts import without_chat_template
from tooltune.rewards.composite import CompositeReward
from tooltune.rewards.registry import PRESETS
from tooltune.schema.rows import CATEGORY, META, PROMPT, SAMPLE_ID, TOOLS

_COLUMNS = (TOOLS, META, SAMPLE_ID, PROMPT, CATEGORY)
_BUILT: dict[str, CompositeReward] = {}


def _reward_spec(extra_info: dict[str, Any]) -> Any:
    spec = extra_info.get("reward")
    if spec is None:
        env = os.environ.get("TOOLTUNE_REWARD", "").strip()
        spec = (json.loads(env) if env.startswith("{") else env) if env else "tool_n1"
    return spec


def _composite(spec: Any, template: str | None) -> CompositeReward:
    key = json.dumps([spec, template], sort_keys=True, default=str)
    if key not in _BUILT:
        if isinstance(spec, Mapping) and spec.get("template"):
            spec = {**spec, "template": without_chat_template(spec["template"])}
        if isinstance(spec, str):
            params = {"template": without_chat_template(template)} if template else {}
            PRESETS.get(spec, key="verl compute_score: extra_info.reward / TOOLTUNE_REWARD")
            _BUILT[key] = CompositeReward.from_preset(spec, **params)
        else:
            _BUILT[key] = CompositeReward.from_config(
                spec, default_template=without_chat_template(template or "tool_n1"))
    return _BUILT[key]


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one verl rollout: {"score": weighted total, each component: value}."""
    extra = extra_info if isinstance(extra_info, dict) else {}
    composite = _composite(_reward_spec(extra), extra.get("template"))
    columns = {k: extra[k] for k in _COLUMNS if k in extra}
    return composite(solution_str, ground_truth, **columns)
