"""Build a tiny Qwen2-architecture causal LM with a locally trained tokenizer, fully offline.

Used by the quickstart, the tests and the benchmarks, where no model hub is reachable. The result is an
ordinary Hugging Face model directory: `AutoModelForCausalLM.from_pretrained(path)` and
`AutoTokenizer.from_pretrained(path)` load it, and TRL trains it like any other checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tooltune.config import Registry
from tooltune.models.corpus import example_texts
from tooltune.models.tokenizer import EOS_TOKEN, PAD_TOKEN, train_tokenizer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TinySize:
    """Architecture of one tiny-model size (Qwen2, tied input/output embeddings)."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int = 2048
    initializer_range: float = 0.02
    """Std of the initial weights. Qwen2's 0.02 suits hidden sizes in the thousands; at hidden 128 it leaves
    attention logits near zero and the model sat for 2,000+ SFT steps before learning to copy an argument
    from the prompt (2 of 3 quickstart seeds). About 1/sqrt(hidden) (0.08) learned it in 200-300 steps."""


SIZES: Registry[TinySize] = Registry("tiny-model size", key="size")
# Fastest thing that is still a real transformer: for unit tests (~25k parameters).
SIZES.add("test", TinySize(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                           intermediate_size=64, vocab_size=384))
# 0.5M parameters: 0.25 s per SFT step at batch 32 on 2 CPU cores, ~1 s per GRPO step
# (4 prompts x 8 completions).
SIZES.add("small", TinySize(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=4, intermediate_size=384, vocab_size=1024,
                            initializer_range=0.08))
# Same as "small": hidden 256 / 4 layers (3.7M parameters) is too slow for a minutes-long quickstart.
SIZES.add("quickstart", TinySize(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=4, intermediate_size=384, vocab_size=1024,
                                 initializer_range=0.08))


def tiny_model(spec: TinySize, seed: int = 0, **config: Any) -> Any:
    """A randomly initialised Qwen2 causal LM of shape `spec` (`config` sets or overrides Qwen2Config
    fields, e.g. the tokenizer's vocab size and special token ids), built under a private generator state
    so that building a model never disturbs the caller's RNG."""
    import torch  # deferred: torch takes seconds to import
    from transformers import Qwen2Config, Qwen2ForCausalLM  # deferred: as above

    fields = {
        "vocab_size": spec.vocab_size,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_hidden_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "max_position_embeddings": spec.max_position_embeddings,
        "initializer_range": spec.initializer_range,
        "tie_word_embeddings": True,
        "pad_token_id": 0,
    }
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Qwen2ForCausalLM(Qwen2Config(**{**fields, **config}))


def build_tiny_model(
    out_dir: str | Path,
    size: str = "test",
    seed: int = 0,
    corpus: Iterable[str] | None = None,
    vocab_size: int | None = None,
    extra_special_tokens: Sequence[str] = (),
) -> Path:
    """Train a tokenizer on `corpus`, build a randomly initialised Qwen2 model, save both to `out_dir`.

    Args:
        out_dir: directory to write (created; existing model files are overwritten).
        size: a name in `SIZES` ("test", "small", "quickstart"); another is an `UnknownName`.
        seed: seeds the weight initialisation; the same seed and corpus give byte-identical files.
        corpus: texts to train the tokenizer on; default: a built-in corpus of rendered tool-calling
            examples (`tooltune.models.corpus.example_texts`). Pass your training texts for a better fit.
        vocab_size: total vocabulary size (default: the size's own); BPE stops early on a small corpus.
        extra_special_tokens: extra strings to keep as single, never-split tokens (like the template
            tags they are kept when decoding, so generated text still contains them).

    Returns:
        The output directory as a `Path`.
    """
    from transformers import GenerationConfig  # deferred: transformers takes seconds to import

    spec = SIZES[size]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    texts = example_texts(seed=0) if corpus is None else corpus
    tokenizer = train_tokenizer(texts, vocab_size or spec.vocab_size, extra_tokens=extra_special_tokens)

    model = tiny_model(
        spec, seed, vocab_size=len(tokenizer), bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(EOS_TOKEN),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN), use_cache=True,
    )
    config = model.config
    model.generation_config = GenerationConfig(
        eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id, bos_token_id=None
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    logger.info("built tiny model %r (%d parameters, vocab %d) in %s", size, n_params, len(tokenizer), out)
    _write_card(out, size, seed, spec, n_params, len(tokenizer))
    return out


def _write_card(out: Path, size: str, seed: int, spec: TinySize, n_params: int, vocab: int) -> None:
    lines = [
        f"# tooltune tiny model ({size})",
        "",
        "Randomly initialised Qwen2 causal LM with a locally trained byte-level BPE tokenizer,",
        "built by `tooltune.models.build_tiny_model`. For tests and offline demos, not a real model.",
        "",
        f"- seed: {seed}",
        f"- parameters: {n_params}",
        f"- vocabulary: {vocab}",
        *(f"- {k}: {v}" for k, v in asdict(spec).items() if k != "vocab_size"),
        "",
    ]
    (out / "README.md").write_text("\n".join(lines), encoding="utf-8")
