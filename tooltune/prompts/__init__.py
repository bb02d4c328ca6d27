"""Prompt templates and history rendering: Sample -> chat messages, calls -> answer text, and the check
that a chat template keeps the reasoning history that rendering kept."""

from tooltune.prompts.chat_template import (
    PROBE_MARKER,
    ReasoningHistoryLost,
    check_history_reasoning,
    history_reasoning_survives,
    render_chat,
)
from tooltune.prompts.render import HISTORY_MODES, render_prompt, render_target
from tooltune.prompts.templates import (
    TEMPLATES,
    BfclPromptError,
    PromptTemplate,
    bfcl_default_system,
    get_template,
    grammar_for,
    python_calls,
    python_literal,
    register_template,
    render_answer,
    system_prompt_text,
    tool_signatures,
    tools_block,
)

__all__ = [
    "HISTORY_MODES",
    "PROBE_MARKER",
    "TEMPLATES",
    "BfclPromptError",
    "PromptTemplate",
    "ReasoningHistoryLost",
    "bfcl_default_system",
    "check_history_reasoning",
    "get_template",
    "grammar_for",
    "system_prompt_text",
    "history_reasoning_survives",
    "python_calls",
    "python_literal",
    "register_template",
    "render_answer",
    "render_chat",
    "render_prompt",
    "render_target",
    "tool_signatures",
    "tools_block",
]
