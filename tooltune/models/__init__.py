"""Models: the offline tiny model builder and the loader shared by every command.

- `build_tiny_model(out_dir, size, seed, corpus)`: Qwen2 causal LM + locally trained byte-level BPE
  tokenizer with a ChatML template (generation markers for assistant-only loss), saved as a normal
  Hugging Face directory.
- `load_model_and_tokenizer(name_or_path, dtype, device)`: local directory or Hub id, clear offline errors.
- `load_tokenizer(name_or_path)`: the tokenizer alone (no weights loaded), with the same errors.
- `tooltune.models.gguf.convert_gguf(source, out, dtype)`: a GGUF file (or a package shipping one) as a
  model folder; imported from its module, since it needs the gguf package (`tooltune models from-gguf`).
"""

from tooltune.models.loading import ModelLoadError, load_model_and_tokenizer, load_tokenizer
from tooltune.models.tiny import SIZES, TinySize, build_tiny_model
from tooltune.models.tokenizer import CHAT_TEMPLATE, EOS_TOKEN, PAD_TOKEN, SPECIAL_TOKENS, TAG_TOKENS

__all__ = [
    "CHAT_TEMPLATE",
    "EOS_TOKEN",
    "PAD_TOKEN",
    "SIZES",
    "SPECIAL_TOKENS",
    "TAG_TOKENS",
    "ModelLoadError",
    "TinySize",
    "build_tiny_model",
    "load_model_and_tokenizer",
    "load_tokenizer",
]
