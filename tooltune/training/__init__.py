"""Training: GRPO on TRL with online pre-rollout filtering and max-variance down-sampling, SFT warm start.

- `config`: `TrainConfig` (dataclasses with help text), `load_config(path, overrides)`.
- `runner.train(cfg, resume=...)`: SFT and/or GRPO stages, checkpoints, resume, final model.
- `grpo.ToolTuneGRPOTrainer`: TRL's GRPOTrainer subclassed at the sampler, reward-gathering and
  batch-building hooks; its own state is one `trainer_state.ToolTuneState` (`trainer.tooltune`).
- `shared_prefix`: the GRPO update with each group's common prompt computed once (KV-cache or packed path).
- `selection`: the engine-independent selection rules (efficiency paper Eq. 4-7).
- `report`: `tooltune report RUN_DIR`. verl (reward entry point, launch settings) is
  `tooltune.integrations.verl`.
Heavy libraries (torch, trl) are imported by the submodules that need them, not here.
"""
