"""verl, the engine the papers trained with: everything tooltune needs to train on it, in one package.

- `reward`: verl's `compute_score(data_source, solution_str, ground_truth, extra_info)` entry point for
  tooltune's rewards (verl loads it by file path: ``reward.custom_reward_function.path``).
- `launch`: a tooltune training config as verl launch settings (`configs/verl/*.yaml`) and the
  ``python -m verl.trainer.main_ppo`` command line they make
  (``python -m tooltune.integrations.verl.launch``).
- `config`: what verl's agent loop reads to run tooltune environments: the tool config and the agentic row
  fields that `tooltune data export --format verl` writes (no verl import).
- `tools`: verl's `BaseTool` backed by tooltune environments (imports verl; verl loads it by class path).
- `sessions`: the episodes behind those tools, and `outcome_score`, their reward function.

Nothing here is imported by `import tooltune.integrations.verl`: `tools` needs verl installed, and the
rest loads on first use. See docs/integrations.md and docs/training.md ("verl").
"""
