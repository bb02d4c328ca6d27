"""tooltune's environments and rewards inside other engines' own training scripts.

`tooltune.integrations.trl`: TRL's `GRPOTrainer(environment_factory=...)` classes, rows and factories.
`tooltune.integrations.verl_tools`: verl's `BaseTool` backed by an environment, and its outcome reward
(imports verl; verl loads it by class path from the tool config that `tooltune data export --format verl`
writes). `tooltune.integrations.signatures`: a tool's JSON schema as a Python signature. See
docs/integrations.md.
"""
