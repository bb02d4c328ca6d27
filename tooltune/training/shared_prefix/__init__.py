"""The shared-prefix GRPO update: each group's common prompt computed once, on one of two paths.

- `logps`: `grouped_logps`, the log-probs of a batch with each distinct prompt run once, on the KV-cache
  path (the prompt's cache reused by its completions) or the packed path; `ordinary_logps`, the
  reference computation; `shuffle_groups`, TRL's row shuffle keeping each prompt's rows adjacent;
- `packed`: the packed path (each group one row of one forward, an attention pattern keeping the
  completions apart), and `packed_attention`, that pattern computed block by block (`tooltune_packed`);
- `support`: what both paths rely on, once: the model inside its DDP / FSDP / DeepSpeed / PEFT wrappers,
  whether a path applies and why not (`model_problem`, `call_problem`), the log-probs of completion tokens;
- `hooks`: `SharedPrefixHooks`, the GRPO trainer's mixin that chooses a path per call (it imports TRL,
  so it is not imported here).
"""

from tooltune.training.shared_prefix.logps import (
    NO_REPEAT,
    PrefixLogps,
    grouped_logps,
    ordinary_logps,
    prompt_groups,
    shuffle_groups,
)
from tooltune.training.shared_prefix.support import PATHS, call_problem, model_problem

__all__ = [
    "NO_REPEAT",
    "PATHS",
    "PrefixLogps",
    "call_problem",
    "grouped_logps",
    "model_problem",
    "ordinary_logps",
    "prompt_groups",
    "shuffle_groups",
]
