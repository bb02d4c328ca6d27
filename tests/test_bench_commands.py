"""`tooltune bench`: finds the bench/ folder outside the installed package and runs a script by name."""

from __future__ import annotations

from tooltune.bench_commands import ENV_VAR
from tooltune.cli import main


def _bench_folder(tmp_path):
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "echo.py").write_text(
        "import sys, pathlib\npathlib.Path(sys.argv[1]).write_text(' '.join(sys.argv[2:]))\n"
    )
    (folder / "fails.py").write_text("raise SystemExit(3)\n")
    return folder


def test_runs_a_script_by_name_with_its_arguments(tmp_path, capsys):
    folder = _bench_folder(tmp_path)
    out = tmp_path / "out.txt"
    assert main(["bench", "--dir", str(folder), "echo", str(out), "a", "--b"]) == 0
    assert out.read_text() == "a --b"
    assert main(["bench", "--dir", str(folder), "fails"]) == 3
    assert main(["bench", "--dir", str(folder), "--list"]) == 0
    assert "echo, fails" in capsys.readouterr().out


def test_folder_from_the_environment_and_clear_errors(tmp_path, monkeypatch, capsys):
    folder = _bench_folder(tmp_path)
    monkeypatch.setenv(ENV_VAR, str(folder))
    assert main(["bench", "--list"]) == 0
    assert str(folder) in capsys.readouterr().out
    assert main(["bench", "nosuch"]) == 2
    assert "unknown benchmark 'nosuch'" in capsys.readouterr().err
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "missing"))
    assert main(["bench", "--list"]) == 2
    err = capsys.readouterr().err
    assert "is not a folder of benchmark scripts" in err and ENV_VAR in err


def test_source_checkout_bench_is_found_from_anywhere(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--list"]) == 0
    assert "efficiency" in capsys.readouterr().out


def test_list_sets_apart_the_scripts_that_need_arguments(tmp_path, capsys):
    folder = _bench_folder(tmp_path)
    head = "import argparse\nap = argparse.ArgumentParser()\n"
    (folder / "on_run.py").write_text(head + "ap.add_argument('run')\nap.add_argument('--n', type=int)\n")
    (folder / "sweep.py").write_text(head + "ap.add_argument('--arms', required=True)\n")
    (folder / "optional.py").write_text(head + "ap.add_argument('files', nargs='*')\n"
                                        "ap.add_argument('--out', required=False)\n")
    (folder / "broken.py").write_text("def (:\n")
    assert main(["bench", "--dir", str(folder), "--list", "--standalone"]) == 0
    assert capsys.readouterr().out.split() == ["echo", "fails", "optional"]
    assert main(["bench", "--dir", str(folder), "--list"]) == 0
    out = capsys.readouterr().out
    assert "echo, fails, optional\n" in out and "need arguments" in out and "broken, on_run, sweep" in out


def test_the_run_folder_tools_of_the_checkout_need_arguments():
    from pathlib import Path

    from tooltune.bench_commands import needs_arguments

    bench = Path(__file__).resolve().parents[1] / "bench"
    assert needs_arguments(bench / "eval_checkpoint.py") and needs_arguments(bench / "grpo_sweep.py")
    assert not needs_arguments(bench / "rewards.py")
