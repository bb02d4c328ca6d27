"""tooltune inside other engines' training: one package per engine, holding what it needs.

`tooltune.integrations.trl`: TRL's `GRPOTrainer(environment_factory=...)` classes, rows and factories.
`tooltune.integrations.verl`: verl's reward entry point, launch settings, tool config and agentic row
fields, and its `BaseTool` backed by an environment (`verl.tools` imports verl; verl loads it by class
path from the tool config that `tooltune data export --format verl` writes).
`tooltune.integrations.signatures`: a tool's JSON schema as a Python signature (both engines use it).
See docs/integrations.md.
"""
