"""The manifest records every choice behind a run's scores; the run identity is the part that defines them."""

from __future__ import annotations

from pathlib import Path

from tooltune.evaluation.benchmark import BENCHMARKS
from tooltune.evaluation.controls import Controls
from tooltune.evaluation.manifest import build_manifest, run_identity


def test_manifest_records_controls_hashes_and_versions(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text("[]")
    c = Controls(template="r2if", system_prompt="bfcl_strong", history="context", keep_reasoning=False)
    m = build_manifest("apibank", ["level-1"], c, [0, 1], "m", "hf:m", [data])
    assert m["controls"]["history"] == "context" and m["controls"]["keep_reasoning"] is False
    assert m["system_prompt_sha256"] != build_manifest("apibank", ["level-1"], Controls(template="r2if"),
                                                       [0], "m", "hf:m", [data])["system_prompt_sha256"]
    assert set(m["data_sha256"]) == {"d.json"} and "tooltune" in m["packages"]
    assert m["predictions_sha256"] == {}


def test_run_identity_is_the_manifest_fields_that_define_the_results(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text("[]")
    c = Controls(system_prompt="literal text")
    m = build_manifest("bfcl", ["simple_python"], c, [0], "m", "replay:p.jsonl", [data],
                       {"temperature": 0.0, "partial": False}, predictions_sha256={"0": "ab"})
    ident = run_identity(m, BENCHMARKS["bfcl"].scoring_packages)
    assert ident["command"] == "eval" and ident["mode"] == "strict" and ident["temperature"] == 0.0
    assert ident["predictions_sha256"] == {"0": "ab"} and ident["data_sha256"] == m["data_sha256"]
    assert "system_prompt" not in ident and ident["system_prompt_sha256"] == m["system_prompt_sha256"]
    assert set(ident["packages"]) == {"tooltune", "bfcl-eval"} and "python" not in ident
    assert set(run_identity({**m, "benchmark": "apibank"})["packages"]) == {"tooltune"}  # the default
    # what is recorded but does not change verdicts leaves the identity alone
    changed = {**m, "python": "0.0", "packages": {**m["packages"], "torch": "9"}}
    assert run_identity(changed, BENCHMARKS["bfcl"].scoring_packages) == ident
