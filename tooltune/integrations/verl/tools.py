"""verl 0.9.1's `BaseTool` backed by tooltune environments (imports verl: verl loads it by the class path
of the tool config that `tooltune data export --format verl` writes, `tooltune.integrations.verl.config`).

verl builds one `EnvironmentTool` per tool name of the config and, in its agent loop, runs each parsed
call as ``create`` -> ``execute`` -> ``release``, handing ``execute`` the trajectory's ``agent_data``. The
episodes themselves (one environment per trajectory, the outcome recorded for the reward) are
`tooltune.integrations.verl.sessions`; `outcome_score` is the matching reward function
(``reward.custom_reward_function.path=tooltune/integrations/verl/sessions.py``, ``name=outcome_score``).
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from tooltune.integrations.verl.sessions import ToolSessions, outcome_score

SESSIONS = ToolSessions()
"""The episodes of every `EnvironmentTool` in this process (a trajectory's tools share one)."""


class EnvironmentTool(BaseTool):
    """One tool of tooltune environment tasks; ``config.environment`` names the environment the tool
    config was written for (the episode's own task decides which environment runs the call)."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema) -> None:
        super().__init__(config, tool_schema)
        self.environment = str(config.get("environment", ""))

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """An instance id; ``create_kwargs={"task": ...}`` names the episode's task when driven directly."""
        instance_id = instance_id or uuid4().hex
        SESSIONS.open(instance_id, kwargs.get("create_kwargs"))
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
                      ) -> tuple[ToolResponse, float, dict]:
        """Run the call in its episode: the tool message, a step reward of 0.0 and ``{"error": bool}``."""
        result = SESSIONS.call(self.name, instance_id, parameters, kwargs.get("agent_data"))
        return ToolResponse(text=result.content), 0.0, {"error": result.error}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The episode's outcome score."""
        return SESSIONS.score(instance_id, kwargs.get("agent_data"))

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        SESSIONS.close(instance_id)


__all__ = ["SESSIONS", "EnvironmentTool", "outcome_score"]
