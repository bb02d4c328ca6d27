"""TRL's bundled chat templates: which one a chat template is, its response template, its training variant.

TRL (`trl.chat_template_utils`) recognizes a model family by comparing the tokenizer's chat template with
the templates it bundles (``trl/chat_templates/*.jinja``), attaches that family's response template
(`add_response_schema`) and offers a training variant (``X_training.jinja``: prefix-preserving, with
``{% generation %}`` markers; Qwen3's keeps the reasoning of earlier turns, which the stock template
drops). TRL maps only the stock templates to response templates; a training variant parses as its
stock template does, so it is mapped to the same one here.
"""

from __future__ import annotations

import functools
import importlib.util
import types
from pathlib import Path
from typing import Any


@functools.lru_cache(maxsize=1)
def _folder() -> Path:
    """TRL's bundled templates, found without importing TRL (importing it takes seconds)."""
    spec = importlib.util.find_spec("trl")
    if spec is None or spec.origin is None:
        raise ImportError("TRL is not installed (pip install trl): its chat templates are needed")
    return Path(spec.origin).parent / "chat_templates"


@functools.lru_cache(maxsize=1)
def bundled_templates() -> dict[str, str]:
    """Every chat template TRL bundles, by source: source -> name (the file's stem)."""
    return {p.read_text(encoding="utf-8"): p.stem for p in sorted(_folder().glob("*.jinja"))}


def trl_response_template(source: str) -> dict[str, Any] | None:
    """TRL's response template for the stock chat template `source` (`add_response_schema`), None when TRL
    does not recognize it."""
    # deferred: importing TRL takes seconds; only a bundled template's lookup needs it
    import trl.chat_template_utils as ctu

    holder = types.SimpleNamespace(chat_template=source)
    try:
        ctu.add_response_schema(holder)
    except ValueError:
        return None
    spec = getattr(holder, "response_template", None)
    return spec if isinstance(spec, dict) else None


@functools.lru_cache(maxsize=1)
def known_templates() -> dict[str, tuple[str, dict[str, Any]]]:
    """The bundled templates TRL maps to a response template, with their training variants:
    source -> (name, response template)."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for source, name in bundled_templates().items():
        if name.endswith("_training"):
            continue
        spec = trl_response_template(source)
        if spec is None:
            continue
        found[source] = (name, spec)
        training = _folder() / f"{name}_training.jinja"
        if training.is_file():
            found.setdefault(training.read_text(encoding="utf-8"), (training.stem, spec))
    return found


def trl_template_name(source: str) -> str | None:
    """The name of the bundled template `source` is (``qwen3``, ``qwen3_training``) when TRL maps it, or
    the stock template it is the training variant of, to a response template; None otherwise."""
    if source not in bundled_templates():  # no need to import TRL for a template it does not bundle
        return None
    found = known_templates().get(source)
    return found[0] if found else None


def training_variant(source: str) -> tuple[str, str] | None:
    """(name, source) of TRL's training variant of the bundled stock template `source`
    (``qwen3`` -> ``qwen3_training``), None when `source` is not one TRL ships a variant for."""
    name = bundled_templates().get(source)
    path = _folder() / f"{name}_training.jinja" if name and not name.endswith("_training") else None
    if path is None or not path.is_file():
        return None
    return path.stem, path.read_text(encoding="utf-8")
