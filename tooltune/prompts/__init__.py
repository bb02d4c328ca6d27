"""Prompt templates and history rendering: Sample -> chat messages, calls -> answer text."""

from tooltune.prompts.render import HISTORY_MODES, render_prompt, render_target
from tooltune.prompts.templates import (
    TEMPLATES,
    PromptTemplate,
    get_template,
    grammar_for,
    python_calls,
    python_literal,
    register_template,
    render_answer,
    tool_signatures,
    tools_block,
)

__all__ = [
    "HISTORY_MODES",
    "TEMPLATES",
    "PromptTemplate",
    "get_template",
    "grammar_for",
    "python_calls",
    "python_literal",
    "register_template",
    "render_answer",
    "render_prompt",
    "render_target",
    "tool_signatures",
    "tools_block",
]
