"""The quickstart: a tiny model visibly learns tool calling with GRPO on 2 CPU cores.

`tooltune quickstart [--config configs/quickstart.yaml] [--out DIR] [--seed N]` runs `run.Pipeline`, a
thin app on the library: the task is `tooltune.data.synthetic.quickstart_task` (built for RL headroom:
copy-cheap values, decision errors and imperfect demonstrations under an exact reward), SFT is
`tooltune.training.sft.SFTLoop`, GRPO is `tooltune.training.runner.train`, evaluation is
`tooltune.generation.score_samples`. Modules: `commands` (CLI) -> `run` (pipeline and stages) ->
`report` -> `stats`; `config` holds the settings.
"""
