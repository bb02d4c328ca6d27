"""A byte-level BPE tokenizer trained locally, with a ChatML chat template that marks assistant text.

The template wraps each assistant turn's content and its closing `<|im_end|>` in
`{% generation %}...{% endgeneration %}`, so `apply_chat_template(..., return_assistant_tokens_mask=True)`
(and TRL's `assistant_only_loss`) can train on assistant tokens only. The end marker is inside the mask
because the model must learn to stop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from tooltune.parsing import GRAMMARS

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Control tokens; skipped when decoding with `skip_special_tokens=True`."""

TAG_TOKENS = (*dict.fromkeys(t for g in GRAMMARS.values() for t in g.tags), "<tools>", "</tools>")
"""Every grammar's tags plus the tool-listing tags of the prompts: one token each, never split; NOT
special, so decoding keeps them (parsers need them)."""

# Qwen2's pre-tokenization regex (transformers' tokenization_qwen2.PRETOKENIZE_REGEX), see train_tokenizer.
PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"

# ChatML. Roles: system, user, assistant, tool. An assistant message whose content is empty but which
# carries `tool_calls` (ours: {"name","arguments"}; OpenAI: {"function": {...}}) is rendered as a Tool-N1
# call block, so OpenAI-style histories still render; the project's prompt renderer normally puts the
# template-specific text into `content` itself.
# With `tools` (apply_chat_template(..., tools=[...]), the `native` prompt template) it renders as
# Qwen2.5's template does, in fewer words: the tools as JSON inside <tools></tools> in the system turn
# (after the system message's own text), an assistant turn's `tool_calls` after its content as one
# <tool_call>\n{"name": …, "arguments": …}\n</tool_call> block per call (the hermes grammar), and
# consecutive tool results as <tool_response> blocks inside one user turn. Without tools the output is
# exactly that of the template without tool support.
CHAT_TEMPLATE = (
    "{%- if tools -%}"
    "{{- '<|im_start|>system\n' -}}"
    "{%- if messages and messages[0]['role'] == 'system' and messages[0]['content'] is string"
    " and messages[0]['content'] -%}"
    "{{- messages[0]['content'] + '\n\n' -}}"
    "{%- endif -%}"
    "{{- '# Tools\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- '\n</tools>\nCall a tool with <tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call>, one block per call.<|im_end|>\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- set content = message['content'] if message['content'] is string else '' -%}"
    "{%- if tools and loop.first and message['role'] == 'system' -%}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{%- if tools and message['tool_calls'] is defined and message['tool_calls'] -%}"
    "{%- set ns = namespace(text=content) -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set f = call['function'] if call['function'] is defined else call -%}"
    "{%- set args = f['arguments'] if f['arguments'] is string else (f['arguments'] | tojson) -%}"
    "{%- set ns.text = ns.text + ('\n' if ns.text else '') + '<tool_call>\n{\"name\": '"
    " + (f['name'] | tojson) + ', \"arguments\": ' + args + '}\n</tool_call>' -%}"
    "{%- endfor -%}"
    "{%- set content = ns.text -%}"
    "{%- elif not content and message['tool_calls'] is defined and message['tool_calls'] -%}"
    "{%- set ns = namespace(calls=[]) -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set f = call['function'] if call['function'] is defined else call -%}"
    "{%- set ns.calls = ns.calls + [{'name': f['name'], 'arguments': f['arguments']}] -%}"
    "{%- endfor -%}"
    "{%- set content = '<tool_call>' + (ns.calls | tojson) + '</tool_call>' -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>assistant\n' -}}"
    "{% generation %}{{- content + '<|im_end|>' -}}{% endgeneration %}"
    "{{- '\n' -}}"
    "{%- elif tools and message['role'] == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' -%}"
    "{{- '<|im_start|>user' -}}"
    "{%- endif -%}"
    "{{- '\n<tool_response>\n' + content + '\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)


def train_bpe(corpus: Iterable[str], vocab_size: int, extra_tokens: Sequence[str] = ()) -> Tokenizer:
    """Train the bare `tokenizers.Tokenizer` (see `train_tokenizer`); needs no transformers import."""
    tok = Tokenizer(models.BPE(continuing_subword_prefix="", end_of_word_suffix="", byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    added = [*TAG_TOKENS, *(t for t in extra_tokens if t not in TAG_TOKENS and t not in SPECIAL_TOKENS)]
    min_vocab = 256 + len(SPECIAL_TOKENS) + len(added)
    if vocab_size < min_vocab:
        raise ValueError(f"vocab_size={vocab_size} is below the byte alphabet + added tokens ({min_vocab})")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(added),
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in added])
    return tok


def train_tokenizer(
    corpus: Iterable[str],
    vocab_size: int,
    extra_tokens: Sequence[str] = (),
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on `corpus` and wrap it as a `PreTrainedTokenizerFast`.

    Normalizer and pre-tokenizer are exactly Qwen2's (NFC; `PRETOKENIZE_REGEX` isolates every digit, so
    numbers are copied one digit per token, which a tiny model learns far faster than multi-digit
    pieces). That is required, not cosmetic: for `model_type == "qwen2"` transformers' `AutoTokenizer`
    loads `Qwen2Tokenizer`, which rebuilds normalizer and pre-tokenizer from its own definition and keeps
    only vocab and merges from `tokenizer.json`; any other pre-tokenizer would silently change on reload.
    `extra_tokens` are added like the tags: whole, never split, kept on decoding (e.g. single-token
    entity names).
    Training is deterministic for a given corpus (checked across processes).
    """
    # deferred: transformers takes seconds to import
    from transformers import PreTrainedTokenizerFast  # noqa: F811  (runtime import; heavy)

    tok = train_bpe(corpus, vocab_size, extra_tokens)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        bos_token=None,
        unk_token=None,
        clean_up_tokenization_spaces=False,
        model_max_length=2048,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast
