"""The protocol controls: the choices every benchmark shares, and a benchmark's own ones in its subclass."""

from __future__ import annotations

import dataclasses

from tooltune.evaluation.benchmark import BENCHMARKS
from tooltune.evaluation.bfcl.benchmark import BfclControls
from tooltune.evaluation.controls import Controls
from tooltune.prompts import resolve_native
from tooltune.schema import Scoring


def test_bfcls_name_style_is_bfcls_own_control() -> None:
    assert "name_style" not in {f.name for f in dataclasses.fields(Controls)}
    assert BENCHMARKS["bfcl"].controls_type is BfclControls
    assert all(BENCHMARKS[name].controls_type is Controls for name in ("apibank", "acebench", "mcp"))
    assert dataclasses.asdict(BENCHMARKS["bfcl"].controls())["name_style"] == "dotted"


def test_cast_keeps_the_shared_settings_and_the_resolved_template() -> None:
    plain = Controls(template="r2if", history="context", scoring="corrected")
    bfcl = BfclControls.cast(plain)
    assert isinstance(bfcl, BfclControls) and bfcl.name_style == "dotted"
    assert (bfcl.template, bfcl.history, bfcl.scoring) == ("r2if", "context", Scoring.CORRECTED)
    assert BfclControls.cast(bfcl) is bfcl
    back = Controls.cast(BfclControls(name_style="underscore", mode="substring"))
    assert type(back) is Controls and back.mode == "substring"
    assert "name_style" not in dataclasses.asdict(back)
    native = Controls(template="native")
    resolved = native.with_template(resolve_native(None, native.prompt_template, "controls.template"))
    assert BfclControls.cast(resolved).prompt_template is resolved.prompt_template
