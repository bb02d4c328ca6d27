"""Prompt controls: the four choices that decide what a model is shown, declared once.

The efficiency paper (arXiv 2606.00135) shows that tool-calling scores move with the prompt template,
the system prompt, how multi-turn history is serialized and whether earlier reasoning is kept.
`PromptControls` declares those four settings once (help text, default and allowed values, through
`tooltune.config.option`); everything that renders prompts takes one:

- the evaluation `Controls` and the training `DataConfig` inherit from it, so the flags (``--template``,
  ``--data.template``) and YAML keys (``data.history``) come from these fields;
- ``tooltune data export`` generates its flags from it;
- `tooltune.prompts.render_prompt`, the exports, the training rows and `score_samples` take it.

`resolve()` turns the user's values into what rendering needs, once: the `PromptTemplate` object (a
"module:function" spec registers its template), the system-prompt text (a template's name or a file
read), and the digest evaluation records (`ResolvedPrompt`).

The template's name is configuration; the template a model answers in can depend on the model
(``native``: its own tool format). Whoever resolves it against the model's chat template
(`tooltune.prompts.resolve_native`) hands the value on with `with_template`: the copy's
`prompt_template`, `grammar` and `resolve()` give that value, while the settings and what runs record
keep the name.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tooltune import config as config_mechanism
from tooltune.config import ConfigError, option
from tooltune.parsing import Grammar
from tooltune.prompts.templates import PromptTemplate, get_template, resolve_template, system_prompt_text

HISTORY_MODES = ("messages", "context")
"""How earlier turns are rendered: each as its own role message for the chat template (messages), or
written out in one user turn (context)."""

C = TypeVar("C", bound="PromptControls")


def _same(name: str) -> str:
    return name


@dataclass(frozen=True)
class ResolvedPrompt:
    """Prompt controls with every name and file resolved: what rendering reads, computed once."""

    template: PromptTemplate
    history: str = "messages"
    keep_reasoning: bool = True
    system_prompt: str | None = None
    """The system text that replaces the template's (a ``{tools}`` placeholder receives the tool list);
    None = the template's own."""
    spec: str = ""
    """The template as the user named it: a registered name or a "module:function" spec that another
    process can load again (empty: the template's name)."""

    @property
    def name(self) -> str:
        """`spec`, or the template's registered name."""
        return self.spec or self.template.name

    @property
    def grammar(self) -> Grammar:
        """The output grammar the template asks for (parsing, rewards and rendering use it)."""
        return self.template.grammar

    @property
    def system(self) -> str:
        """The system text in effect, placeholders unfilled."""
        return self.template.system if self.system_prompt is None else self.system_prompt

    def system_sha256(self) -> str:
        """sha256 of `system`: evaluation records it, so runs under different system prompts differ."""
        return hashlib.sha256(self.system.encode()).hexdigest()


@dataclass
class PromptControls:
    """The template, system prompt, history form and reasoning history of rendered prompts."""

    template: str = option(
        "tool_n1",
        "Prompt template and output grammar: a registered name (tool_n1, r2if, bfcl, bfcl_strong, toolrl, "
        "tool_n1_compact, native: the tools go to the model's own chat template) or 'module:function' whose "
        "call registers one and returns its name.",
    )
    system_prompt: str | None = option(
        None,
        "System prompt in place of the template's own: literal text ({tools} is filled in with the tool "
        "list), a text file (its contents) or a registered template's name (its system text, e.g. "
        "bfcl_strong); empty or none = the template's own.",
    )
    history: str = option(
        "messages",
        "Multi-turn history: messages (each earlier turn a role message through the chat template) or "
        "context (the whole history in one user turn).",
        HISTORY_MODES,
    )
    keep_reasoning: bool = option(True, "Keep the reasoning of earlier assistant turns in the history.")

    def check(self, key: Callable[[str], str] = _same) -> None:
        """Raise ConfigError when a prompt setting is outside its choices, the template is not
        registered (a "module:function" spec is loaded here), or the system prompt is a mistyped name or
        an unreadable file; `key` turns a field name into the name the user gave (``data.template``,
        ``--system-prompt``)."""
        check_history(self.history, key("history"))
        for name in ("template", "system_prompt", "history", "keep_reasoning"):
            meta = PromptControls.__dataclass_fields__[name].metadata
            config_mechanism.check_value(key(name), getattr(self, name), meta.get("choices"))
        resolve_template(self.template, key("template"))
        try:
            system_prompt_text(self.system_prompt, key("system_prompt"))
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{key('system_prompt')}: cannot read {self.system_prompt!r} ({e})") from None

    def validate(self: C) -> C:
        """Check every field's declared choices and ranges (a subclass's too) and the prompt settings
        (`check`); called by `tooltune.config.load`, which puts the section's key in front."""
        config_mechanism.check_values(self)
        self.check()
        return self

    # The resolved template given to `with_template`: left unannotated so that it is no dataclass field
    # (a value handed on, not a setting: no flag, no YAML key, not in the recorded config).
    _model_template = None

    def with_template(self: C, template: PromptTemplate) -> C:
        """A copy whose `prompt_template` is `template`, the template `self.template` names as resolved
        for one model (`tooltune.prompts.resolve_native`); the settings are unchanged."""
        if template.name != get_template(self.template).name:
            raise ValueError(f"with_template: {template.name!r} is not the template {self.template!r}")
        out = copy.copy(self)
        out._model_template = template
        return out

    @property
    def prompt_template(self) -> PromptTemplate:
        """The template object `template` names (the resolved one given to `with_template`, if any)."""
        return self._model_template or get_template(self.template, "template")

    @property
    def grammar(self) -> Grammar:
        """The output grammar of the template."""
        return self.prompt_template.grammar

    def system_text(self) -> str | None:
        """The system-prompt override: a template name's text, a file's contents or the text itself
        (`tooltune.prompts.system_prompt_text`); None (also for an empty value) = the template's own."""
        return system_prompt_text(self.system_prompt, "system_prompt") or None

    def resolve(self, system_extra: str = "") -> ResolvedPrompt:
        """The controls with the template and system prompt resolved; `system_extra` is appended to the
        system text in effect (a benchmark's own instructions)."""
        template = self.prompt_template
        system = self.system_text()
        if system_extra:
            system = (template.system if system is None else system) + system_extra
        return ResolvedPrompt(template, self.history, self.keep_reasoning, system, self.template)

    def system_sha256(self, extra: str = "") -> str:
        """sha256 of the system text in effect (with `extra` appended), as `resolve(extra)` renders it."""
        return self.resolve(extra).system_sha256()


PromptLike = PromptControls | ResolvedPrompt | PromptTemplate | str
"""What the rendering functions take: controls, resolved controls, or a template (a name or a value,
standing for `PromptControls(template=name)` with the value as its template)."""


def check_history(history: str, key: str = "history") -> None:
    """Refuse ``native`` as a history mode with the name of the mode it meant: ``native`` is the template
    answered in the model's own tool format."""
    if history == "native":
        raise ConfigError(
            f"{key}: 'native' is a template (the model's own tool format), not a history mode: use "
            "'messages' (each earlier turn a role message through the chat template) or 'context'"
        )


def as_prompt(prompt: PromptLike) -> ResolvedPrompt:
    """`prompt` resolved; a template name stands for `PromptControls(template=name)`, a template value
    for the same controls holding it."""
    if isinstance(prompt, ResolvedPrompt):
        return prompt
    if isinstance(prompt, PromptTemplate):
        return PromptControls(template=prompt.name).with_template(prompt).resolve()
    if isinstance(prompt, str):
        prompt = PromptControls(template=prompt)
    if not isinstance(prompt, PromptControls):
        raise TypeError(
            f"expected PromptControls, ResolvedPrompt or a template, got {type(prompt).__name__}"
        )
    return prompt.resolve()


def template_of(prompt: PromptLike | PromptTemplate) -> PromptTemplate:
    """The template object of `prompt` (nothing else is resolved: no system prompt is read)."""
    if isinstance(prompt, PromptTemplate):
        return prompt
    if isinstance(prompt, ResolvedPrompt):
        return prompt.template
    if isinstance(prompt, PromptControls):
        return prompt.prompt_template
    return get_template(prompt)
