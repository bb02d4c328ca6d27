"""The experiment pipeline: the staged end-to-end runs of `tooltune quickstart` (data, model, SFT warm start,
GRPO, continued SFT at equal training time, evaluations, report), in resumable run folders.

A profile is what a run trains and measures; two ship: `synthetic` (the default, the offline CPU demo: a
tiny model built here on the synthetic task) and `real` (a pretrained model folder, real training data,
the official benchmarks; `configs/quickstart_real_smollm2.yaml`). A run folder is one run under one set
of settings; `--branch-from` starts one from another run's warm start, for GRPO ablations. Everything
it trains, generates and scores goes through the library below (`tooltune.training`,
`tooltune.evaluation`, `tooltune.generation`, `tooltune.data`); this package holds the orchestration.

Modules, each importing only those listed before it:
  config       `QuickstartConfig`, the settings, read from a YAML preset with dotted overrides
  stats        binomial standard errors and paired differences
  compute      the clocks of an equal-compute comparison, `BudgetWatch`
  memory       `PeakMemory`: a phase's peak resident memory
  run_folder   `Profile` (a profile's stages and the function of each) and `RunFolder` (a run's identity,
               stage results, checkpoints, data splits, training config)
  measure      a checkpoint's greedy exact match and pass@k
  branch       `--branch-from`: a run folder filled from another run's stages before GRPO
  report       the synthetic profile's report; `real_report` the real profile's
  stages       the training stages both profiles run: SFT warm start, GRPO, continued SFT
  synthetic    the synthetic profile: data, tiny model, evaluations, `synthetic_profile()`
  real         the real profile: data preparation, model folder, benchmark evaluations, `real_profile()`
  pipeline     `Pipeline`: runs a profile's stages in a run folder and writes the report
  commands     the CLI, `tooltune quickstart`
"""
