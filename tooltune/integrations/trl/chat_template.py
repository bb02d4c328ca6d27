"""The chat template a TRL ``environment_factory`` run needs: one whose tool calls TRL can read.

TRL's `GRPOTrainer` reads a rollout's tool calls with the tokenizer's response parser. Unless the
tokenizer ships one (``response_template``), TRL attaches it only to the chat templates it bundles
(``trl/chat_templates``: Qwen2.5, Qwen3, Llama 3.1/3.2, gpt-oss, GLM-4 MoE, ...) and otherwise stops with
"Unrecognized chat template, failed to add response schema". The fix is one line, the template TRL
bundles for the model's family:

    tokenizer.chat_template = trl_chat_template("qwen2_5")

`check_chat_template(tokenizer)` says so, naming that line, before TRL is reached.
"""

from __future__ import annotations

from typing import Any

from tooltune.config import ConfigError
from tooltune.prompts.trl_templates import bundled_templates, trl_response_template

TRL_FAILURE = "Unrecognized chat template, failed to add response schema"
"""How TRL 1.16 fails on a chat template it cannot read tool calls of."""


def parsed_templates() -> list[str]:
    """The names of the bundled chat templates TRL reads tool calls of (stock ones: TRL maps no
    ``*_training`` variant)."""
    return sorted(name for source, name in bundled_templates().items()
                  if not name.endswith("_training") and trl_response_template(source) is not None)


def trl_chat_template(name: str) -> str:
    """The source of the chat template TRL bundles as `name` (``qwen2_5``, ``qwen3``, ``llama3_2``, ...)."""
    sources = {n: source for source, n in bundled_templates().items()}
    if name not in sources:
        raise ConfigError(f"TRL bundles no chat template {name!r}; it reads tool calls of: "
                          f"{', '.join(parsed_templates())}")
    return sources[name]


def chat_template_problem(tokenizer: Any) -> str | None:
    """Why TRL cannot read the tool calls of a model with `tokenizer`, with the line that fixes it; None
    when it can (the tokenizer ships a response parser, or its chat template is one TRL maps to one)."""
    inner = getattr(tokenizer, "tokenizer", tokenizer)  # a processor holds the tokenizer TRL parses with
    if getattr(inner, "response_template", None) is not None or getattr(inner, "response_schema", None):
        return None
    source = getattr(tokenizer, "chat_template", None)
    if isinstance(source, str) and trl_response_template(source) is not None:
        return None
    return (f"TRL cannot read tool calls with this tokenizer's chat template (its GRPOTrainer stops with "
            f"\"{TRL_FAILURE}\"): give it the template TRL bundles for the model's family, e.g. "
            f"tokenizer.chat_template = tooltune.integrations.trl.trl_chat_template(\"qwen2_5\") "
            f"(TRL reads tool calls of: {', '.join(parsed_templates())})")


def check_chat_template(tokenizer: Any) -> None:
    """Raise `ConfigError` (one line naming the fix) when TRL cannot read tool calls with `tokenizer`."""
    problem = chat_template_problem(tokenizer)
    if problem is not None:
        raise ConfigError(problem)
