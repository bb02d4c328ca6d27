# ruff: noqa: E501  (prompt texts are prose whose line breaks are part of the prompt)
"""Prompt templates: the system prompt that teaches an output grammar, and the answers in it.

Each template is written in this project's words with the same instructions as its source, except
the ``bfcl`` ones, whose text is bfcl-eval's own:
- ``tool_n1``: Tool-N1's lightweight thinking template (arXiv 2505.00024, Sec. 3): tools inside
  ``<tools>…</tools>``, three numbered steps (think, decide on tool use, answer in the format),
  output ``<think>…</think>`` then ``<tool_call>[…]</tool_call>``.
- ``r2if``: R2IF's template: two-step reasoning inside ``<reason>`` (Step1 names the function as
  ``#func_name#``; Step2 opens a ``For #func_name#:`` block per called function with one
  ``- param: analysis`` line per argument, the lines `tooltune.rewards.smv.parse_step2` reads), the
  paper's note on arguments that are missing from the request or must be one of enumerated values,
  calls inside ``<tool>``, the fixed rejection text `R2IF_REJECTION` for irrelevant requests, and no
  other text.
- ``bfcl``: bfcl-eval's own default system prompt for prompting models, taken from the installed
  package the first time the text is needed (`bfcl_default_system`), tools listed as BFCL lists them
  (an indented JSON list). Importing this module does not need bfcl-eval; asking for the text without
  it raises `BfclPromptError`.
- ``bfcl_strong``: that text plus the stronger multi-turn instructions studied by the efficiency paper
  (arXiv 2606.00135): keep calling until the turn's task is done, use earlier results.
- ``tool_n1_compact``: Tool-N1's grammar with a system text short enough for a tiny model (the full
  instructions would triple the prompt length), tools as one-line signatures and a one-line reasoning
  that names the calls (the quickstart's template).
- ``native``: the model's own tool format. The system text holds no tool list: the tools travel as
  OpenAI-style function schemas to the tokenizer's chat template (``apply_chat_template(messages,
  tools=…)``, `tooltune.prompts.native`), which lists them as the model was trained to read them;
  answers are in the ``hermes`` grammar (one ``<tool_call>`` JSON object per call, free text elsewhere,
  answers in the model's own format, which depends on the model: the registered template holds no
  grammar, and `tooltune.prompts.resolve_native` resolves it against a chat template into a template
  value that holds one (`tooltune.prompts.native_format`: parsed by the model's own response parser,
  written by its chat template; ``hermes`` for a chat template an endpoint applies). Asking an
  unresolved template for its grammar raises `UnresolvedTemplate`.

Each template holds its output grammar (`tooltune.parsing.Grammar`); nothing else maps template names
to grammars. `TEMPLATES` and `TOOL_FORMATS` (`tooltune.prompts.tool_listing`) are `Registry`
instances (an unknown name raises `UnknownName` with the closest names). Answers are rendered by that
grammar (`Grammar.render`, the inverse of its decoder); `render_answer` only adds the template's own default reasoning. A template name may also be a
"module:function" spec (`resolve_template`), loaded the first time it is looked up.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooltune.config import ConfigError, Registry, UnknownName, check_prompt_text, unknown_name
from tooltune.parsing import (
    GRAMMARS,
    NO_CALL_REPLY,
    R2IF_REJECTION,
    Grammar,
    all_tags,
    get_grammar,
    python_calls,  # noqa: F401  (re-exported: callers import the Python call writer from here)
    python_literal,  # noqa: F401  (re-exported, as python_calls)
    register_grammar,
)
from tooltune.parsing.render import strip_tags
from tooltune.prompts.tool_listing import TOOL_FORMATS
from tooltune.schema import ToolCall, ToolSpec

TOOLRL_NO_CALL_REPLY = NO_CALL_REPLY
"""The `<response>` of a ToolRL-format answer that makes no call, and the plain reply of a ``native`` one
(the data has no reply text): `tooltune.parsing.NO_CALL_REPLY`."""


TOOL_N1_SYSTEM = """You are an assistant that completes the user's task by calling tools when they help.

# Tools
These tools are available:
<tools>
{tools}
</tools>

# Each turn
1. Think first: inside <think></think>, work out what the user wants from the conversation so far and which tools, if any, serve it.
2. Decide on tool use: when tools are needed, put every call in one JSON list inside <tool_call></tool_call>, each call as {"name": <tool name>, "arguments": {<parameter>: <value>}}; independent calls go in the same list. When no tool fits, the list is empty: [].
3. Answer in exactly this form and write nothing else:
<think> your reasoning </think>
<tool_call>
[{"name": "...", "arguments": {...}}]
</tool_call>"""

R2IF_SYSTEM = """You are an assistant that decides which function to call and with which arguments.

Available functions:
{tools}

Answer in exactly two blocks and write no other text:
<reason>
Step1: say which function serves the request, writing its name as #function_name#.
Step2: for each function you call, a line "For #function_name#:" followed by one line per argument, "- parameter: how its value follows from the request and the function's description".
If a required argument is missing from the request, write "- parameter: missing from the request" and do not call that function. If an argument must be one of enumerated values, write which allowed value the request corresponds to.
</reason>
<tool>[{"name": "...", "arguments": {...}}]</tool>
If no function can serve the request (none fits, or a required argument is missing), explain why in <reason> and put exactly this text inside <tool>: {rejection}"""


BFCL_STRONG_SUFFIX = """

In every turn, do your best to finish the user's request within that turn. Keep producing function calls until the request is fulfilled as far as you can; use the results of earlier calls and earlier turns instead of asking again. When you have no more calls to make, the turn ends and the next request follows."""


class BfclPromptError(RuntimeError):
    """bfcl-eval's default system prompt cannot be read (bfcl-eval missing or changed)."""


_BFCL_PLACEHOLDER_DOC = ({"name": "tooltune_tools_placeholder", "description": "",
                          "parameters": {"type": "dict", "properties": {}}},)


@functools.lru_cache(maxsize=1)
def bfcl_default_system() -> str:
    """bfcl-eval's default system prompt for prompting models, with ``{tools}`` where it lists the functions.

    Built by the installed package's own `formulate_system_prompt` under its
    `DEFAULT_SYSTEM_PROMPT_FORMAT` (what its handlers send when an entry asks for no other format),
    with a placeholder function list that is then replaced by ``{tools}``; read once per process.
    bfcl-eval creates folders under `BFCL_PROJECT_ROOT` when imported, so that variable is pointed at a
    scratch folder first unless it is already set (as `tooltune.environments.bfcl.bfcl_environment` does)."""
    if not os.environ.get("BFCL_PROJECT_ROOT"):
        os.environ["BFCL_PROJECT_ROOT"] = tempfile.mkdtemp(prefix="tooltune-bfcl-")
    try:
        # deferred: bfcl-eval is optional, and importing it writes folders under BFCL_PROJECT_ROOT
        from bfcl_eval.constants.default_prompts import DEFAULT_SYSTEM_PROMPT_FORMAT
        from bfcl_eval.model_handler.utils import (  # deferred: as above
            format_function_doc,
            formulate_system_prompt,
            parse_prompt_variation_params,
        )
    except ImportError as e:
        raise BfclPromptError(
            f"the bfcl and bfcl_strong templates use bfcl-eval's own default system prompt, but bfcl_eval "
            f"cannot be imported ({e}): install it (pip install --no-deps -r requirements/bfcl-nodeps.txt) "
            "or pass a system prompt of your own"
        ) from e
    doc_format = parse_prompt_variation_params(DEFAULT_SYSTEM_PROMPT_FORMAT)[2]
    placeholder = [json.loads(json.dumps(f)) for f in _BFCL_PLACEHOLDER_DOC]
    text = formulate_system_prompt(DEFAULT_SYSTEM_PROMPT_FORMAT, placeholder)
    listing = format_function_doc(placeholder, doc_format)
    if doc_format != "json" or text.count(listing) != 1:
        raise BfclPromptError(
            f"bfcl-eval's default system prompt ({DEFAULT_SYSTEM_PROMPT_FORMAT}) no longer lists the "
            "functions as one JSON block; the bfcl templates need updating for this bfcl-eval version"
        )
    return text.replace(listing, "{tools}")


def bfcl_strong_system() -> str:
    """`bfcl_default_system` followed by the stronger multi-turn instructions (`BFCL_STRONG_SUFFIX`)."""
    return bfcl_default_system() + BFCL_STRONG_SUFFIX


def _clean_reasoning(reasoning: str) -> str:
    """`reasoning` without any grammar's tags, stripped (what `Grammar.render` writes)."""
    return strip_tags(reasoning, all_tags())


def _compact_reasoning(calls: Sequence[ToolCall]) -> str:
    """The calls' names in order: every token costs rollout time on a tiny model, and naming each call
    once makes the number of calls an explicit early decision."""
    if not calls:
        return "No offered tool fits."
    return "Call " + ", ".join(c.name for c in calls) + "."


def render_answer(
    calls: Sequence[ToolCall],
    template: str | PromptTemplate | Grammar = "tool_n1",
    reasoning: str | None = None,
    include_reasoning: bool = True,
    fill_reasoning: bool = True,
) -> str:
    """The assistant text that answers with `calls` in `template`'s grammar (inverse of parsing).

    `template` is a template (or its name) or a grammar (or its name); the grammar renders
    (`Grammar.render`), with the template's own default reasoning when it has one. Without `reasoning`
    (or with one that is empty once the grammar tags are removed) the default reasoning is written,
    unless `fill_reasoning` is False: then the answer is the call block alone, as with
    `include_reasoning=False`."""
    if isinstance(template, Grammar):
        grammar, default_reasoning = template, None
    else:
        tpl = template if isinstance(template, PromptTemplate) else None
        if isinstance(template, str) and (template in TEMPLATES or ":" in template):
            tpl = get_template(template)
        grammar = tpl.grammar if tpl is not None else get_grammar(template)
        default_reasoning = tpl.default_reasoning if tpl is not None else None
    return grammar.render(calls, reasoning, include_reasoning=include_reasoning,
                          fill_reasoning=fill_reasoning, default_reasoning=default_reasoning)


class UnresolvedTemplate(ConfigError):
    """A template answered in the model's own format was asked for its grammar before it was resolved
    against the model's chat template (`tooltune.prompts.resolve_native`)."""


@dataclass(frozen=True)
class PromptTemplate:
    """A named system prompt plus the output grammar it teaches; an immutable value."""

    name: str
    system_source: str | Callable[[], str]
    """Text with a {tools} placeholder (and {rejection} for r2if), or a function returning it, called
    the first time the text is needed (`system`)."""
    answer_grammar: Grammar | None
    """The output grammar the prompt asks for (parsing, rewards and tags all come from it); None for a
    template answered in the model's own format until `tooltune.prompts.resolve_native` resolves it."""
    tools_format: str = "json"
    """A `TOOL_FORMATS` key: how {tools} is rendered."""
    default_reasoning: Callable[[Sequence[ToolCall]], str] | None = None
    """Writes the reasoning of a rendered answer when the data has none (None: the grammar's default)."""

    @property
    def grammar(self) -> Grammar:
        """`answer_grammar`; `UnresolvedTemplate` when the template still waits for the model's format."""
        if self.answer_grammar is None:
            raise UnresolvedTemplate(
                f"template {self.name!r} answers in the model's own tool format, which this template value "
                f"does not hold yet: resolve it against the model's chat template "
                f"(tooltune.prompts.resolve_native(tokenizer, {self.name!r}); None for a chat template an "
                "endpoint applies) and pass the resolved template instead of its name"
            )
        return self.answer_grammar

    @property
    def resolved(self) -> bool:
        """Whether the template holds its output grammar (always, except a chat-tools template's
        registered form)."""
        return self.answer_grammar is not None

    def __deepcopy__(self, memo: dict[int, Any]) -> PromptTemplate:
        return self  # immutable; a resolved grammar may hold a tokenizer that is not worth copying

    @property
    def system(self) -> str:
        """The system text with its placeholders (a lazily resolved text is resolved here)."""
        src = self.system_source
        return src if isinstance(src, str) else src()

    @property
    def chat_tools(self) -> bool:
        """The tools go to the tokenizer's chat template (``tools=``), not into the system text."""
        return self.tools_format == "chat_template"

    def system_prompt(self, tools: Sequence[ToolSpec], override: str | None = None) -> str:
        """The system text with the tool list filled in; `override` replaces the template's text."""
        text = self.system if override is None else override
        listing = TOOL_FORMATS[self.tools_format](tools)
        return text.replace("{tools}", listing).replace("{rejection}", R2IF_REJECTION)


TOOLRL_SYSTEM = """You are a helpful multi-turn assistant that can call tools to complete the user's task.

# Available tools
{tools}

# Steps for each turn
1. Think: inside <think></think>, reason about the user's request, the conversation so far and which tools, if any, serve it.
2. Decide on tool use: when tools are needed, list the calls inside <tool_call></tool_call>, one JSON object per line, each {"name": <tool name>, "parameters": {<parameter>: <value>}} ("parameters" is {} when the tool takes none).
3. Respond: when no tool fits, or to speak to the user, write the reply inside <response></response>.

# Output format
<think> your reasoning </think>
<tool_call>
{"name": "...", "parameters": {...}}
</tool_call>
<response> optional reply </response>

Always start with <think>. Put calls only inside <tool_call>, never in <response>."""

TOOL_N1_COMPACT_SYSTEM = (
    "Tools:\n<tools>\n{tools}\n</tools>\nThink in <think></think>, then give the JSON list of calls "
    "in <tool_call></tool_call> ([] if no tool fits)."
)

def _native_reply(calls: Sequence[ToolCall]) -> str:
    """No text before the calls (as a chat template writes an assistant turn with calls); the fixed reply
    `TOOLRL_NO_CALL_REPLY` when there is no call."""
    return "" if calls else TOOLRL_NO_CALL_REPLY


TEMPLATES: Registry[PromptTemplate] = Registry("template")
"""Every prompt template by name (`register_template` adds one)."""
for _template in (
    PromptTemplate("tool_n1", TOOL_N1_SYSTEM, GRAMMARS["tool_n1"]),
    PromptTemplate("r2if", R2IF_SYSTEM, GRAMMARS["r2if"]),
    PromptTemplate("bfcl", bfcl_default_system, GRAMMARS["python"], "json_list"),
    PromptTemplate("bfcl_strong", bfcl_strong_system, GRAMMARS["python"], "json_list"),
    PromptTemplate("toolrl", TOOLRL_SYSTEM, GRAMMARS["toolrl"]),
    PromptTemplate("tool_n1_compact", TOOL_N1_COMPACT_SYSTEM, GRAMMARS["tool_n1"], "signatures",
                   _compact_reasoning),
    PromptTemplate("native", "", None, "chat_template", _native_reply),
):
    TEMPLATES.register(_template)


def register_template(
    name: str,
    system: str | Callable[[], str],
    grammar: str | Grammar | None,
    tools_format: str = "json",
    default_reasoning: Callable[[Sequence[ToolCall]], str] | None = None,
) -> PromptTemplate:
    """Add a prompt template (e.g. a compact system prompt for a tiny model) answered in `grammar`;
    `system` is the text or a function returning it on first use; `tools_format` is a `TOOL_FORMATS` key.
    `grammar` None (only with ``tools_format="chat_template"``): the model's own format, resolved per
    model by `tooltune.prompts.resolve_native`.

    A `Grammar` object that is not registered yet is registered here (`tooltune.parsing.register_grammar`:
    one without a renderer is refused), so that every template's answers can be rendered. Registering
    the same name again replaces the template."""
    TOOL_FORMATS.get(tools_format)  # UnknownName for a tools format that is not registered
    if grammar is None and tools_format != "chat_template":
        raise ValueError(f"template {name!r}: only a chat_template tools format leaves the grammar to the model")
    if isinstance(grammar, Grammar):
        answer_grammar: Grammar | None = register_grammar(grammar)
    else:
        answer_grammar = None if grammar is None else get_grammar(grammar)
    template = PromptTemplate(name, system, answer_grammar, tools_format, default_reasoning)
    return TEMPLATES.add(name, template, replace=True)


_SPECS: dict[str, str] = {}
"""'module:function' template specs already resolved, and the name each registered."""


def resolve_template(spec: str, key: str = "template") -> str:
    """The registered template name for `spec`: a registered name, or "module:function" where calling
    `function()` registers a template and returns its name (a user's own template, e.g.
    "my_project.prompts:register"; called once per process). A ConfigError names `key` otherwise."""
    if isinstance(spec, str) and spec in TEMPLATES:
        return spec
    if isinstance(spec, str) and ":" in spec:
        if spec not in _SPECS:
            module, attr = spec.split(":", 1)
            try:
                func = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError, ValueError) as e:
                raise ConfigError(f"{key}: cannot load {spec!r} ({e})") from None
            name = func() if callable(func) else func
            if not isinstance(name, str):
                raise ConfigError(f"{key}: {spec!r} did not return a template name")
            TEMPLATES.get(name, key=key)
            _SPECS[spec] = name
        return _SPECS[spec]
    return TEMPLATES.get(spec if isinstance(spec, str) else repr(spec), key=key).name  # UnknownName


def get_template(name: str | PromptTemplate, key: str = "template") -> PromptTemplate:
    """The registered template `name` (or the one a "module:function" spec registers,
    `resolve_template`; a `PromptTemplate` value passes through); otherwise `UnknownName` naming `key`
    and the closest names."""
    if isinstance(name, PromptTemplate):
        return name
    if isinstance(name, str) and ":" in name and name not in TEMPLATES:
        return TEMPLATES[resolve_template(name, key)]
    return TEMPLATES.get(name if isinstance(name, str) else repr(name), key=key)


def grammar_for(name: str | PromptTemplate | Grammar, key: str = "template") -> Grammar:
    """The grammar of template `name` (a template value, a registered name or a "module:function"
    spec), or the grammar called `name` (templates take precedence); `UnknownName` naming `key` and the
    closest names otherwise, `UnresolvedTemplate` for a template still waiting for the model's format."""
    if isinstance(name, Grammar):
        return name
    if isinstance(name, PromptTemplate) or name in TEMPLATES:
        return get_template(name).grammar
    if name in GRAMMARS:
        return GRAMMARS[name]
    if isinstance(name, str) and ":" in name:
        return get_template(name, key).grammar
    raise UnknownName(str(unknown_name(key, "template or grammar", name, [*TEMPLATES, *GRAMMARS])))


def _existing_file(spec: str) -> Path | None:
    """The file `spec` names when it is an existing file; text that cannot be a path (a line longer than
    the file system allows, an unknown ``~user``) names none."""
    try:
        path = Path(spec).expanduser()
        return path if path.is_file() else None
    except (OSError, ValueError, RuntimeError):
        return None


def system_prompt_text(spec: str | None, key: str = "system_prompt") -> str | None:
    """The system-prompt text a user's `spec` stands for: a registered template's name gives that
    template's system text, an existing file its contents, anything else is the text itself (None and
    "" keep the template's own). A single word that is none of these is a ConfigError naming `key` (a
    mistyped name, never used as the prompt)."""
    if spec is None:
        return None
    check_prompt_text(key, spec, TEMPLATES)
    if spec in TEMPLATES:
        return TEMPLATES[spec].system
    path = _existing_file(spec) if spec else None
    return path.read_text(encoding="utf-8") if path is not None else spec
