"""Prompt templates and history rendering: Sample -> chat messages, calls -> answer text, the checks
that a chat template keeps the reasoning history that rendering kept, and that it can render the tools
of the ``native`` template (the model's own tool format, parsed by the model's own response parser and
written by its chat template once `resolve_native` resolves it against a tokenizer). `PromptControls` holds
the four choices every renderer takes (template, system prompt, history form, reasoning history).
`encode_chat` turns messages into token ids with text from outside the model (tools, users) encoded as
plain text, never as the tokenizer's control tokens."""

from tooltune.prompts.chat_template import (
    PROBE_MARKER,
    ReasoningHistoryLost,
    check_history_reasoning,
    history_reasoning_survives,
    render_chat,
    training_template_keeping_reasoning,
)
from tooltune.prompts.controls import (
    PromptControls,
    PromptLike,
    ResolvedPrompt,
    as_prompt,
    check_history,
    template_of,
)
from tooltune.prompts.native import (
    CHAT_TOOLS_COLUMN,
    ChatToolsUnsupported,
    chat_tools,
    native_template_grammar,
    prompt_tools,
    prompt_tools_json,
    resolve_native,
    tool_support_problem,
    use_training_chat_template,
    without_chat_template,
)
from tooltune.prompts.native_format import (
    NativeFormatError,
    NativeGrammar,
    grammar_with_tools,
    native_grammar,
)
from tooltune.prompts.native_parse import MAX_NATIVE_CHARS
from tooltune.prompts.plain_text import OUTSIDE_ROLES, count_marker_tokens, encode_chat, encode_plain
from tooltune.prompts.render import HISTORY_MODES, render_prompt, render_target
from tooltune.prompts.templates import (
    TEMPLATES,
    BfclPromptError,
    PromptTemplate,
    UnresolvedTemplate,
    bfcl_default_system,
    get_template,
    grammar_for,
    python_calls,
    python_literal,
    register_template,
    render_answer,
    resolve_template,
    system_prompt_text,
)
from tooltune.prompts.tool_listing import TOOL_FORMATS, tool_signatures, tools_block

__all__ = [
    "CHAT_TOOLS_COLUMN",
    "HISTORY_MODES",
    "MAX_NATIVE_CHARS",
    "OUTSIDE_ROLES",
    "count_marker_tokens",
    "encode_chat",
    "encode_plain",
    "NativeFormatError",
    "NativeGrammar",
    "grammar_with_tools",
    "native_grammar",
    "native_template_grammar",
    "training_template_keeping_reasoning",
    "UnresolvedTemplate",
    "check_history",
    "resolve_native",
    "use_training_chat_template",
    "without_chat_template",
    "PROBE_MARKER",
    "TEMPLATES",
    "TOOL_FORMATS",
    "BfclPromptError",
    "ChatToolsUnsupported",
    "PromptControls",
    "PromptLike",
    "PromptTemplate",
    "ReasoningHistoryLost",
    "ResolvedPrompt",
    "as_prompt",
    "bfcl_default_system",
    "chat_tools",
    "check_history_reasoning",
    "get_template",
    "grammar_for",
    "system_prompt_text",
    "template_of",
    "history_reasoning_survives",
    "prompt_tools",
    "prompt_tools_json",
    "python_calls",
    "python_literal",
    "register_template",
    "render_answer",
    "render_chat",
    "render_prompt",
    "render_target",
    "resolve_template",
    "tool_signatures",
    "tool_support_problem",
    "tools_block",
]
