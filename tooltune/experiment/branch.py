"""A run that starts from another run's warm start: `tooltune quickstart --branch-from SRC`.

An ablation of the GRPO stage (another reward, learning rate or group size) compares two GRPO runs from
one SFT checkpoint. Training a second warm start would cost the SFT time again and would add the
warm starts' own difference to the comparison. `branch(pipe, src)` therefore fills a new run folder
with the finished stages of `src` that come before GRPO (or before the screen of its prompts,
`BRANCH_POINTS`): their stage files, the
data, the models and the evaluations of the checkpoints before GRPO. The pipeline then runs GRPO and
the later stages with the new settings, and an evaluation before GRPO that `src` has not finished (it
reads only settings both runs share); every other stage before GRPO must be finished in `src`.

Only settings that no earlier stage reads may differ: those under `train.reward`, `train.grpo`,
`train.filter`, `train.downsample`, `screen` and `train.diagnostics.eval_every` (`BRANCH_KEYS`). Any other
difference is refused, naming each key with both values. Files are hard links where the file system
allows (no extra disk; no stage rewrites a finished file) and copies otherwise. Paths to `src` inside
the copied stage files are rewritten to the new folder, so the new folder does not depend on `src`
afterwards. `branch.json` in the new folder records the source, the copied stages and the differences,
and the report states them. Branching again into a folder that is already branched from the same source
resumes: only missing files are copied.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from tooltune.config import ConfigError
from tooltune.experiment.config import QuickstartConfig
from tooltune.experiment.run_folder import Profile, RunFolder
from tooltune.rundir import differences, read_identity

logger = logging.getLogger(__name__)

BRANCH_POINTS = ("screen", "grpo")
"""A branch runs itself the first of these stages its profile has, and every later stage: the real
profile's screen of GRPO's prompts reads GRPO's sampling settings, so it belongs to the branch."""
BRANCH_KEYS = (
    "train.reward.", "train.grpo.", "train.filter.", "train.downsample.", "screen.",
    "train.diagnostics.eval_every",
)
"""Settings (dotted prefixes) a branch may change: no stage before the branch point reads them (GRPO's
validation points, `train.diagnostics.eval_every`, are GRPO's alone)."""
BRANCH_FILE = "branch.json"


def branch_point(stages: tuple[str, ...], profile: str) -> int:
    """The index of the first stage a branch runs itself (the first of `BRANCH_POINTS` in `stages`)."""
    for i, stage in enumerate(stages):
        if stage in BRANCH_POINTS:
            return i
    raise ConfigError(f"--branch-from: the {profile} profile has no {' or '.join(BRANCH_POINTS)} stage to "
                      "branch at")


def _branchable(difference: str) -> bool:
    """Whether a 'key: a vs b' difference is under `BRANCH_KEYS`; a whole section is (`screen: missing vs
    {...}` from a source made before the section existed)."""
    key = difference.split(":", 1)[0]
    return difference.startswith(BRANCH_KEYS) or f"{key}." in BRANCH_KEYS


def _keys() -> str:
    """`BRANCH_KEYS` as a sentence: "train.reward, train.grpo, ... and train.downsample"."""
    names = [k.removesuffix(".") for k in BRANCH_KEYS]
    return ", ".join(names[:-1]) + f" and {names[-1]}"


def _link_tree(src: Path, dst: Path) -> int:
    """Hard-link (or copy) every file under `src` into `dst` that `dst` lacks; returns the files added."""
    added = 0
    for f in sorted(src.rglob("*")):
        target = dst / f.relative_to(src)
        if f.is_dir() or target.exists() or f.name.startswith("."):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(f, target)
        except OSError:  # another file system, or links not allowed: a copy
            shutil.copy2(f, target)
        added += 1
    return added


def _moved(value: Any, old: str, new: str) -> Any:
    """`value` with every string starting with the folder `old` rewritten to start with `new`."""
    if isinstance(value, dict):
        return {k: _moved(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_moved(v, old, new) for v in value]
    if isinstance(value, str) and (value == old or value.startswith(old + os.sep)):
        return new + value[len(old):]
    return value


def setting_differences(src: Path, cfg: QuickstartConfig) -> list[str]:
    """'key: <src's value> vs <this run's>' for each setting in which `cfg` differs from the quickstart
    run in `src` (ConfigError when `src` holds no quickstart run)."""
    stored = read_identity(src) if src.is_dir() else None
    ours = cfg.identity()
    if not stored or stored.get("command") != ours["command"] or not isinstance(stored.get("config"), dict):
        raise ConfigError(f"--branch-from {src}: not a quickstart run folder (no run.json written by "
                          "`tooltune quickstart`)")
    return differences(stored["config"], ours["config"], defaults=cfg.default_identity()["config"])


def plan_branch(src: str | os.PathLike, out: str | os.PathLike, cfg: QuickstartConfig, profile: Profile
                ) -> dict[str, Any]:
    """What branching `out` from `src` records (`branch.json`), reading only: ConfigError when `src` is
    not a quickstart run, has not finished a stage before the branch point other than an evaluation,
    differs in a setting outside `BRANCH_KEYS` or in none, or when `out` holds stages of its own or a
    branch of another folder. A folder already branched from `src` gives its record (a resume; `src`
    may be gone by then)."""
    src, out = Path(src).resolve(), Path(out).resolve()
    if src == out:
        raise ConfigError(f"--branch-from {src}: the source is the output folder itself; pass another --out")
    marker = out / BRANCH_FILE
    if marker.is_file():
        before = json.loads(marker.read_text())
        if before.get("source") != str(src):
            raise ConfigError(f"--branch-from {src}: {out} is a branch of {before.get('source')}, "
                              f"not of {src}")
        if before.get("complete"):
            return before
    elif any((out / "stages").glob("*.json")):
        raise ConfigError(f"--branch-from {src}: {out} already holds stages of its own run; a branch starts "
                          "in a new folder")
    stages = profile.stages
    shared = stages[: branch_point(stages, cfg.profile)]
    diffs = setting_differences(src, cfg)
    fixed = [d for d in diffs if not _branchable(d)]
    if fixed:
        raise ConfigError(f"--branch-from {src}: only the settings under {_keys()} may "
                          f"differ from the run a branch starts from (the stages it shares read the others); "
                          f"{len(fixed)} differ, the source's value vs this run's: {'; '.join(fixed)}")
    if not diffs:
        raise ConfigError(f"--branch-from {src}: this run's settings equal that run's; resume it with "
                          f"--out {src}")
    finished = [s for s in shared if (src / "stages" / f"{s}.json").is_file()]
    missing = [s for s in shared if s not in finished and not s.startswith("eval_")]
    if missing:
        raise ConfigError(f"--branch-from {src}: stage(s) {', '.join(missing)} not finished there; finish "
                          f"them first (tooltune quickstart ... --out {src} --stop-after {missing[-1]})")
    return {"source": str(src), "stages": finished, "differences": diffs}


def branch(pipe: RunFolder, src: str | os.PathLike) -> dict[str, Any]:
    """Fill `pipe.out` with the stages of `src` before the branch point (see the module docstring; refusals:
    `plan_branch`, called first); returns what `branch.json` records."""
    record = plan_branch(src, pipe.out, pipe.cfg, pipe.profile)
    if record.get("complete"):
        return record
    src, out = Path(record["source"]), pipe.out.resolve()
    marker = out / BRANCH_FILE
    marker.write_text(json.dumps({**record, "complete": False}, indent=1))
    stages = pipe.profile.stages
    later = {s.removeprefix("eval_") for s in stages[branch_point(stages, pipe.cfg.profile):]}  # checkpoints
    added = _link_tree(src / "data", out / "data") if (src / "data").is_dir() else 0
    for kind in ("models", "evals"):
        for folder in sorted((src / kind).iterdir()) if (src / kind).is_dir() else []:
            # a later checkpoint's folder, or one of its own (a progress checkpoint), is the branch's to write
            ours = any(folder.name == c or folder.name.startswith(f"{c}_") for c in later)
            if folder.is_dir() and not ours:
                added += _link_tree(folder, out / kind / folder.name)
    for stage in record["stages"]:
        result = json.loads((src / "stages" / f"{stage}.json").read_text())
        moved = _moved(result, str(src), str(out))
        (out / "stages" / f"{stage}.json").write_text(json.dumps(moved, indent=1))
    record = {**record, "complete": True}
    marker.write_text(json.dumps(record, indent=1))
    logger.info("branched %s from %s: %d files, stages %s", out, src, added, ", ".join(record["stages"]))
    return record


def branch_notes(out: str | os.PathLike) -> list[str]:
    """Lines for a report stating what a branched run folder shares with its source (none otherwise)."""
    marker = Path(out) / BRANCH_FILE
    if not marker.is_file():
        return []
    record = json.loads(marker.read_text())
    return [f"Branch of {record['source']}: stages {', '.join(record['stages'])} are that run's; this run "
            f"differs in {'; '.join(record['differences'])}."]
