"""Load a causal LM and its tokenizer from a local directory or a Hugging Face Hub id.

One function so that every command (train, eval, quickstart) resolves models the same way and explains
the same way why a model cannot be loaded on an offline machine. A hub id is tried on the hub only when
the hub answers: `hub_unreachable` connects to it first (a few seconds at most), and when nothing
answers only the local cache is consulted, so an offline machine gets the advice at once instead of
after the hub client's retries (about 50 s).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import urllib.parse
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

_DTYPES = ("auto", "float32", "float16", "bfloat16")

ADAPTER_CONFIG = "adapter_config.json"
"""The file that marks a folder as a PEFT (LoRA) adapter instead of a full model."""


class ModelLoadError(RuntimeError):
    """A model or tokenizer could not be loaded; the message says why and what to do."""


HUB_PROBE_SECONDS = 3.0
"""How long `hub_unreachable` waits for a connection to the Hugging Face Hub."""
_PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def _offline() -> bool:
    flags = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in flags)


def hub_unreachable(timeout: float = HUB_PROBE_SECONDS) -> str | None:
    """Why the Hugging Face Hub cannot be used from here, or None when it may be: the offline switches
    (HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE) are set, or no TCP connection to the hub's host (HF_ENDPOINT,
    default huggingface.co:443) opens within `timeout` seconds. Behind a proxy (HTTPS_PROXY, ALL_PROXY)
    nothing is probed: the hub client finds out."""
    if _offline():
        return "HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE is set"
    if any(os.environ.get(v) for v in _PROXIES):
        return None
    url = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as e:
        return f"{host}:{port} cannot be reached ({getattr(e, 'strerror', None) or e})"


def _resolve_dtype(dtype: Any) -> Any:
    import torch  # deferred: torch takes seconds to import

    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        if dtype == "auto":
            return "auto"
        if dtype in _DTYPES:
            return getattr(torch, dtype)
    raise ValueError(f"dtype must be a torch.dtype or one of {_DTYPES}, got {dtype!r}")


def load_model_and_tokenizer(
    name_or_path: str | Path,
    dtype: Any = None,
    device: str | None = None,
    padding_side: str | None = None,
    trust_remote_code: bool = False,
    attn_implementation: str | None = None,
) -> tuple[Any, Any]:
    """Return `(model, tokenizer)` for a local model directory or a Hub id such as `Qwen/Qwen2.5-3B-Instruct`.

    Args:
        name_or_path: a directory holding `config.json` + weights + tokenizer files (e.g. from
            `build_tiny_model` or `hf download <id> --local-dir <dir>`), a directory holding a PEFT
            (LoRA) adapter (`adapter_config.json`: its base model is loaded and the adapter merged in),
            or a Hub model id.
        dtype: `None` (the library default, float32), `"auto"` (the checkpoint's dtype), `"float32"`,
            `"float16"`, `"bfloat16"` or a `torch.dtype`.
        device: e.g. `"cpu"`, `"cuda"`, `"cuda:1"`; `None` leaves the model where it was loaded (CPU).
        padding_side: set on the tokenizer when given (`"left"` for batched generation).
        trust_remote_code: passed through; keep False unless you trust the checkpoint's code.
        attn_implementation: the attention kernel (`sdpa`, `eager`, `flex_attention`,
            `flash_attention_2`, ...); None lets transformers choose.

    A tokenizer without a pad token gets its eos token as pad token. Hub ids are fetched (or taken from
    the local cache) by `transformers`; when the hub cannot be reached (`hub_unreachable`, or
    `HF_HUB_OFFLINE=1`) only the cache is consulted. Failures
    raise `ModelLoadError` stating whether the path is missing, the Hub unreachable, or files incomplete
    (for an adapter: which base model it needs). A model from a local directory gets that directory's
    absolute path as `name_or_path`, so an adapter trained on it records where its base model is.
    """
    # deferred: transformers takes seconds to import
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = str(name_or_path)
    path = Path(source).expanduser()
    is_local = path.is_dir()
    if not is_local and (path.exists() or source.startswith((".", "/", "~")) or source.count("/") > 1):
        raise ModelLoadError(f"model path {source!r} is not a directory holding a saved model")
    if is_local and not (path / "config.json").is_file() and (path / ADAPTER_CONFIG).is_file():
        return _load_adapter(path, dtype, device, padding_side, trust_remote_code)
    if is_local and not (path / "config.json").is_file():
        raise ModelLoadError(f"model directory {source!r} has no config.json (not a saved HF model?)")
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if attn_implementation:  # e.g. sdpa, eager, flex_attention, flash_attention_2; None: transformers' choice
        kwargs["attn_implementation"] = attn_implementation
    resolved = _resolve_dtype(dtype)
    if resolved is not None:
        kwargs["dtype"] = resolved
    target = str(path) if is_local else source
    unreachable = None if is_local else hub_unreachable()
    if unreachable:  # only the local cache can serve it: no request, no retries
        kwargs["local_files_only"] = True
    try:
        tokenizer = AutoTokenizer.from_pretrained(target, trust_remote_code=trust_remote_code,
                                                  **({"local_files_only": True} if unreachable else {}))
        model = AutoModelForCausalLM.from_pretrained(target, **kwargs)
    except OSError as e:
        if is_local:
            raise ModelLoadError(f"could not load the model in {source!r}: {e}") from e
        hint = (
            f"the Hugging Face Hub cannot be used here ({unreachable}) and the model is not in the local "
            "cache" if unreachable else
            "it is not a local directory and could not be fetched from the Hugging Face Hub (no network?)"
        )
        raise ModelLoadError(
            f"cannot load model {source!r}: {hint}. On a machine with Hub access run "
            f"`hf download {source} --local-dir <dir>`, copy <dir> here and pass its path instead. "
            f"(transformers said: {str(e).splitlines()[0] if str(e) else type(e).__name__})"
        ) from e
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    if padding_side is not None:
        tokenizer.padding_side = padding_side
    if is_local:  # an adapter trained on this model records where its base is, wherever it is loaded from
        model.name_or_path = str(path.resolve())
    if device is not None:
        model = model.to(device)
    logger.info("loaded %s (%s, dtype %s) on %s", source, type(model).__name__, model.dtype, model.device)
    return model, tokenizer


def load_tokenizer(name_or_path: str | Path, trust_remote_code: bool = False) -> Any:
    """The tokenizer of a local model directory, a LoRA adapter folder (its own tokenizer files, else its
    base model's) or a Hub id, without loading the model; the errors of `load_model_and_tokenizer`."""
    # deferred: transformers takes seconds to import
    from transformers import AutoTokenizer

    source = str(name_or_path)
    path = Path(source).expanduser()
    if path.is_dir() and not (path / "config.json").is_file() and (path / ADAPTER_CONFIG).is_file() \
            and not (path / "tokenizer_config.json").is_file():
        source, path = adapter_base(path), Path(adapter_base(path))
    if path.is_dir():
        try:
            return AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code)
        except OSError as e:
            raise ModelLoadError(f"could not load the tokenizer in {source!r}: {e}") from e
    unreachable = hub_unreachable()
    try:
        return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code,
                                             **({"local_files_only": True} if unreachable else {}))
    except OSError as e:
        raise ModelLoadError(
            f"cannot load the tokenizer of {source!r}: "
            f"{unreachable or 'not a local directory and not fetched from the Hugging Face Hub'}. On a "
            f"machine with Hub access run `hf download {source} --local-dir <dir>` and pass <dir> instead."
        ) from e


def adapter_base(folder: str | Path) -> str:
    """The base model of the PEFT adapter in `folder` (`base_model_name_or_path` of its
    adapter_config.json): a hub id, or a folder; a relative folder that does not exist from here is
    looked up beside the adapter. ModelLoadError when it is not recorded."""
    folder = Path(folder)
    try:
        settings = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
        base = settings.get("base_model_name_or_path") if isinstance(settings, dict) else None
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{folder / ADAPTER_CONFIG}: cannot read it ({e})") from e
    if not base:
        raise ModelLoadError(
            f"adapter {str(folder)!r}: {ADAPTER_CONFIG} names no base model (base_model_name_or_path)"
        )
    p = Path(base).expanduser()
    if not p.is_absolute() and not p.exists() and (folder / p).is_dir():
        return str(folder / p)
    return str(base)


def _load_adapter(
    folder: Path, dtype: Any, device: str | None, padding_side: str | None, trust_remote_code: bool
) -> tuple[Any, Any]:
    """A LoRA (PEFT) adapter folder: its base model with the adapter merged in, and the adapter folder's
    tokenizer (the base's when the folder has none)."""
    from peft import PeftModel  # deferred: peft imports transformers
    from transformers import AutoTokenizer  # deferred: transformers takes seconds to import

    base = adapter_base(folder)
    merged = folder / "merged"
    has_merged = (merged / "config.json").is_file()
    hint = f"; {merged} holds the model with the adapter merged in" if has_merged else ""
    try:
        model, tokenizer = load_model_and_tokenizer(base, dtype, None, padding_side, trust_remote_code)
    except ModelLoadError as e:
        raise ModelLoadError(
            f"adapter {str(folder)!r} needs its base model {base!r} (base_model_name_or_path in "
            f"{ADAPTER_CONFIG}), which cannot be loaded ({e}){hint}"
        ) from e
    if (folder / "tokenizer_config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
        if tokenizer.pad_token is None and tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        if padding_side is not None:
            tokenizer.padding_side = padding_side
    try:
        model = PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    except (OSError, ValueError, RuntimeError) as e:
        raise ModelLoadError(f"could not load the adapter in {str(folder)!r} onto {base!r}: {e}") from e
    model.name_or_path = str(folder.resolve())
    if device is not None:
        model = model.to(device)
    logger.info("loaded adapter %s on %s (%s, dtype %s)", folder, base, type(model).__name__, model.dtype)
    return model, tokenizer
