"""The ``mcp`` environment against the project's own stdio MCP server (`tooltune.environments.mcp.notes`):
schema-checked calls, the three outcome checks, a server restarted or reset per episode, a dead, hanging
or missing server as a failed step with a reason, streamable HTTP, episodes through `evaluate_episodes`
and agentic GRPO steps, and no server process left behind by any test."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
psutil = pytest.importorskip("psutil")

from tooltune.data.mcp_tasks import task_from_record  # noqa: E402
from tooltune.environments import TaskError, make_environment  # noqa: E402
from tooltune.environments.mcp import McpEnvironment, McpSettings, check_call, read_task  # noqa: E402
from tooltune.environments.mcp.client import POOL, McpConnection, close_all  # noqa: E402
from tooltune.environments.mcp.data import McpServer, result_value  # noqa: E402
from tooltune.environments.mcp.notes import NotesStore  # noqa: E402
from tooltune.prompts import render_answer  # noqa: E402
from tooltune.schema import Sample, ToolCall, ToolSpec  # noqa: E402

NOTES = [sys.executable, "-m", "tooltune.environments.mcp.notes"]
SERVER = McpServer.parse(NOTES)
TEMPLATE = "tool_n1"
ADD = ToolCall("add_note", {"title": "groceries", "text": "milk"})
APPEND = ToolCall("append_to_note", {"title": "groceries", "text": "eggs"})


def notes_servers() -> list[Any]:
    """This process's live notes-server children (zombies not yet reaped are gone already)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "mcp.notes" in " ".join(p.cmdline()):
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_for(condition: Any, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.fixture(autouse=True)
def no_server_left_behind() -> Iterator[None]:
    """Every test ends with every server it started stopped: released, pooled ones closed, none running."""
    yield
    POOL.clear()
    close_all()
    assert wait_for(lambda: not notes_servers()), [p.cmdline() for p in notes_servers()]


@pytest.fixture(scope="module")
def tools() -> list[ToolSpec]:
    conn = McpConnection(SERVER).start()
    try:
        return conn.list_tools()
    finally:
        conn.close()


def task(server_tools: list[ToolSpec], tid: str = "t", **fields: Any) -> Sample:
    """A notes task written as a user's task line, made into a sample as `tooltune data tasks mcp` does."""
    record = {"id": tid, "prompt": f"Save a note titled groceries that says milk ({tid})",
              "check": {"kind": "calls", "calls": [ADD.to_dict()]}, **fields}
    return task_from_record(record, SERVER, server_tools)


def env_for(sample: Sample, **settings: Any) -> McpEnvironment:
    env = McpEnvironment(McpSettings(**settings))
    env.reset(sample)
    return env


# -- pieces without a server ------------------------------------------------------------------------

def test_environments_built_with_different_settings_each_keep_their_own():
    quick = make_environment("mcp", {"mcp": McpSettings(call_seconds=1.0, result_chars=100)})
    patient = make_environment("mcp", {"mcp": McpSettings(call_seconds=20.0, result_chars=500)})
    default = make_environment("mcp")
    seconds = [e.settings.call_seconds for e in (quick, patient, default)]
    assert seconds == [1.0, 20.0, McpSettings().call_seconds]
    assert quick.step_seconds < default.step_seconds < patient.step_seconds
    text = "word " * 200
    assert [len(e._cut(text)) for e in (quick, patient, default)] == [100, 500, len(text)]
    given = McpSettings(call_seconds=5.0)
    built = make_environment("mcp", {"mcp": given})
    given.call_seconds = 50.0  # the caller's config object changes after the build
    assert built.settings.call_seconds == 5.0


def test_the_notes_store_keeps_state_and_refuses_what_it_cannot_do():
    s = NotesStore()
    assert s.add("a", "x", ["work", "work"]) == {"saved": "a", "notes": 1}
    s.add("b", "y")
    assert s.titles() == ["a", "b"] and s.titles("work") == ["a"]
    assert s.append("a", "z")["text"] == "x\nz"
    assert s.get("a") == {"title": "a", "text": "x\nz", "tags": ["work"]}
    for bad in (lambda: s.add("a", "again"), lambda: s.get("nope"), lambda: s.delete("nope"),
                lambda: s.add("  ", "x")):
        with pytest.raises(ValueError):
            bad()
    assert s.delete("b")["notes"] == 1 and s.reset() == {"notes": 0} and s.titles() == []


def test_server_forms_and_their_refusals():
    assert McpServer.parse("python -m x --flag 'a b'").command == ("python", "-m", "x", "--flag", "a b")
    assert McpServer.parse("http://127.0.0.1:1/mcp").url == "http://127.0.0.1:1/mcp"
    full = McpServer.parse({"command": ["srv"], "env": {"K": "v"}, "cwd": "/tmp"})
    assert McpServer.parse(full.to_dict()) == full and McpServer.parse(["srv"]) == McpServer(("srv",))
    for bad in ({}, {"command": "a", "url": "http://x"}, {"url": "ftp://x"}, {"command": "a", "shell": 1},
                {"url": "http://x", "env": {"K": "v"}}, 3, {"command": "'unclosed"}, {"command": [1]}):
        with pytest.raises(ValueError):
            McpServer.parse(bad)


def test_result_value_unwraps_the_sdk_wrapper_and_reads_json_text():
    assert result_value({"result": ["a"]}, "a") == ["a"]
    assert result_value({"title": "a", "result": 1}, "") == {"title": "a", "result": 1}
    assert result_value(None, '{"n": 1}') == {"n": 1} and result_value(None, "plain text") == "plain text"
    assert result_value(None, "[" * 100_000) == "[" * 100_000


def test_arguments_are_checked_against_the_whole_input_schema():
    props = {"n": {"type": "integer", "minimum": 0}, "mode": {"enum": ["a", "b"]},
             "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}}
    spec = ToolSpec.from_dict({"name": "f", "parameters": {"type": "object", "required": ["n"],
                                                           "properties": props}})
    assert check_call(ToolCall("f", {"n": 1, "mode": "a", "tags": ["x"]}), spec) is None
    assert check_call(ToolCall("f", {"n": 1, "tags": None}), spec) is None
    cases = {"unknown argument": {"n": 1, "zz": 2}, "required": {"mode": "a"}, "'integer'": {"n": "1"},
             "minimum": {"n": -1}, "is not one of": {"n": 1, "mode": "c"}, "tags": {"n": 1, "tags": ["x", 2]}}
    for words, args in cases.items():
        problem = check_call(ToolCall("f", args), spec)
        assert problem is not None and words in problem, (args, problem)


ANSWER = {"kind": "answer", "contains": ["x"]}


@pytest.mark.parametrize("spec, words", [
    ({"server": "http://127.0.0.1:1/mcp", "check": ANSWER}, "cannot be restarted"),
    ({"server": "http://127.0.0.1:1/mcp", "reset": "restart", "check": []}, "needs a command server"),
    ({"server": NOTES, "check": {"kind": "state"}}, "kind"),
    ({"server": NOTES}, "check: missing"),
    ({"server": NOTES, "check": {"kind": "calls", "calls": [], "extra": 1}}, "unknown ['extra']"),
    ({"server": NOTES, "check": {"kind": "answer", "contains": []}}, "contains"),
    ({"server": NOTES, "reset": {"tool": 3}, "check": ANSWER}, "reset"),
    ({"server": NOTES, "stateful": True, "check": ANSWER}, "unknown field"),
    ({"check": ANSWER}, "server: missing"),
])
def test_malformed_tasks_are_refused_naming_the_field(spec: dict, words: str):
    with pytest.raises(ValueError) as e:
        read_task({"name": "mcp", **spec})
    assert words in str(e.value)
    bad = Sample(id="bad", source="x", category="multi_step", messages=[{"role": "user", "content": "q"}],
                 tools=[], answer=[], meta={"env": {"name": "mcp", **spec}})
    with pytest.raises(TaskError, match="'bad'"):
        make_environment("mcp").reset(bad)


# -- episodes on the notes server -------------------------------------------------------------------

def test_a_stdio_episode_runs_checked_calls_and_judges_all_three_checks(tools: list[ToolSpec]):
    sample = task(tools, setup=[{"name": "add_note", "arguments": {"title": "old", "text": "x"}}], check=[
        {"kind": "calls", "calls": [ADD.to_dict(), APPEND.to_dict()], "ignore": ["get_note", "list_notes"]},
        {"kind": "result", "call": {"name": "get_note", "arguments": {"title": "groceries"}},
         "equals": {"title": "groceries", "text": "milk\neggs", "tags": []}},
        {"kind": "answer", "contains": ["saved   GROCERIES"]}])
    assert {t.name for t in sample.tools} == {t.name for t in tools}  # no reset tool: all are offered
    env = env_for(sample)
    steps = {
        "ok": env.step(ADD),
        "extra argument": env.step(ToolCall("add_note", {"title": "x", "text": "y", "zz": 1})),
        "wrong type": env.step(ToolCall("add_note", {"title": "x", "text": 5})),
        "not plain JSON": env.step(ToolCall("add_note", {"title": "x", "text": float("nan")})),
        "unknown tool": env.step(ToolCall("rm_rf", {})),
        "the server says no": env.step(ToolCall("add_note", {"title": "old", "text": "again"})),
        "read": env.step(ToolCall("list_notes", {})),
        "ok 2": env.step(APPEND),
    }
    assert json.loads(steps["ok"].content) == {"saved": "groceries", "notes": 2} and not steps["ok"].error
    for name in ("extra argument", "wrong type", "not plain JSON", "unknown tool", "the server says no"):
        assert steps[name].error, name
    assert "zz" in steps["extra argument"].content and "'string'" in steps["wrong type"].content
    assert "already exists" in steps["the server says no"].content
    # the refused calls were never sent: the server holds only the setup's note and the model's
    assert steps["read"].content.split("\n") == ["groceries", "old"]
    out = env.outcome("Saved groceries.")
    assert out.success and out.score == 1.0, out.details
    assert [c["passed"] for c in out.details["checks"]] == [True, True, True]
    assert env.outcome() is out  # judged once; the server is released
    assert env.step(ADD).error


class Sneaky(str):
    """A str subclass: not a plain JSON literal."""


HOSTILE = [
    ToolCall("__init__", {}), ToolCall("_store", {}), ToolCall("add_note.__globals__", {}),
    ToolCall("reset_notes", {}),  # listed by the server but not offered by this task
    ToolCall("add_note", {"title": "t", "text": "x", "__class__": 1}),
    ToolCall("add_note", {"title": "t", "text": "x", "not an identifier": 1}),
    ToolCall("add_note", {"title": "t", "text": float("nan")}),
    ToolCall("add_note", {"title": "t", "text": {1, 2}}),
    ToolCall("add_note", {"title": "t", "text": Sneaky("x")}),
    ToolCall("add_note", {"title": "t", "text": "x" * 30_000}),
    ToolCall("add_note", {"title": "t", "text": "x", "tags": [[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]}),
    ToolCall("add_note", {"title": "t", "text": "x", "tags": "not a list"}),
    ToolCall("add_note", {"title": "t"}),
]


def test_hostile_calls_are_refused_before_they_reach_the_server(tools: list[ToolSpec]):
    offered = [t.name for t in tools if t.name != "reset_notes"]
    empty = {"kind": "result", "call": {"name": "list_notes", "arguments": {}}, "equals": []}
    env = env_for(task(tools, tools=offered, check=empty))
    for call in HOSTILE:
        result = env.step(call)
        assert result.error and "error" in json.loads(result.content), call.name
    assert env.outcome().success  # nothing reached the store
    code = "__import__('os').system('touch /tmp/tooltune-mcp-pwned')"
    read = {"name": "get_note", "arguments": {"title": "c"}}
    env = env_for(task(tools, check={"kind": "result", "call": read,
                                     "equals": {"title": "c", "text": code, "tags": []}}))
    assert not env.step(ToolCall("add_note", {"title": "c", "text": code})).error
    assert env.outcome().success and not Path("/tmp/tooltune-mcp-pwned").exists()  # stored as text


def test_failed_checks_say_what_differs(tools: list[ToolSpec]):
    sample = task(tools, check=[
        {"kind": "calls", "calls": [ADD.to_dict()]},
        {"kind": "result", "call": {"name": "list_notes", "arguments": {}}, "equals": ["groceries"]},
        {"kind": "answer", "contains": ["saved", "eggs"]}])
    env = env_for(sample)
    other = ToolCall("add_note", {"title": "groceries", "text": "milk", "tags": []})  # another call
    assert not env.step(other).error
    out = env.outcome("saved it")
    calls, result, answer = out.details["checks"]
    assert not out.success and out.score == 0.0
    assert calls["missing"] == [ADD.to_dict()] and calls["extra"] == [other.to_dict()]
    assert result["passed"] and result["value"] == ["groceries"]
    assert answer["absent"] == ["eggs"]


def test_restart_gives_every_episode_a_fresh_server(tools: list[ToolSpec]):
    empty = {"kind": "result", "call": {"name": "list_notes", "arguments": {}}, "equals": []}
    env = make_environment("mcp")
    env.reset(task(tools, check=empty))
    assert not env.step(ADD).error and not env.outcome().success
    env.reset(task(tools, check=empty))
    assert env.outcome().success  # the note of the episode before is gone with its server
    env.close()


def test_a_reset_tool_reuses_one_pooled_server(tools: list[ToolSpec]):
    sample = task(tools, reset={"tool": "reset_notes"},
                  setup=[{"name": "add_note", "arguments": {"title": "old", "text": "x"}}],
                  check={"kind": "result", "call": {"name": "list_notes", "arguments": {}},
                         "equals": ["old"]})
    assert "reset_notes" not in [t.name for t in sample.tools]  # the reset tool is not offered
    pids = set()
    for _ in range(3):
        env = env_for(sample)
        env.step(ToolCall("list_notes", {}))
        pids |= {p.pid for p in notes_servers()}
        assert env.outcome().success  # reset, then only the setup's note
    assert len(pids) == 1


def test_a_killed_server_fails_the_step_with_a_reason_and_the_episode_goes_on(tools: list[ToolSpec]):
    env = env_for(task(tools, check={"kind": "calls", "calls": [ADD.to_dict(), APPEND.to_dict()]}))
    assert not env.step(ADD).error
    (server,) = notes_servers()
    server.send_signal(signal.SIGKILL)
    failed = env.step(APPEND)
    assert failed.error and "closed" in json.loads(failed.content)["error"]
    later = env.step(ToolCall("list_notes", {}))  # fails at once, with the same reason
    assert later.error and json.loads(later.content)["error"].endswith(json.loads(failed.content)["error"])
    out = env.outcome()
    assert not out.success and "closed" in out.details["server"] and out.details["checks"] == []


def test_a_hanging_server_is_a_failed_step_not_a_hung_run(tools: list[ToolSpec]):
    env = env_for(task(tools), call_seconds=2.0)
    assert not env.step(ToolCall("list_notes", {})).error
    (server,) = notes_servers()
    server.send_signal(signal.SIGSTOP)  # alive, answering nothing
    try:
        hung = env.step(ADD)
        assert hung.error and "hangs" in hung.content
        assert not env.outcome().success
        assert wait_for(lambda: not server.is_running() or server.status() == psutil.STATUS_ZOMBIE)
    finally:
        if server.is_running():
            server.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("command, words", [
    (["/nonexistent/server"], "did not start"),
    ([sys.executable, "-c", "import time; time.sleep(60)"], "no MCP handshake within 1 s"),
])
def test_a_server_that_does_not_start_fails_every_step_with_the_reason(tools: list[ToolSpec], command: list,
                                                                       words: str):
    sample = task(tools)
    sample.meta["env"]["server"] = command
    env = env_for(sample, start_seconds=1.0)
    step = env.step(ADD)
    assert step.error and words in step.content
    out = env.outcome()
    assert not out.success and words in out.details["server"]
    close_all()
    assert wait_for(lambda: not [p for p in psutil.Process().children(recursive=True)
                                 if "time.sleep(60)" in " ".join(p.cmdline())])


def test_tool_messages_are_cut_to_the_result_cap(tools: list[ToolSpec]):
    env = env_for(task(tools), result_chars=100)
    long = ToolCall("add_note", {"title": "long", "text": "word " * 1000})
    env.step(long)
    got = env.step(ToolCall("get_note", {"title": "long"}))
    assert len(got.content) == 100 and got.content.endswith("characters in all]") and not got.error


def test_a_streamable_http_server_reset_through_a_tool(tools: list[ToolSpec]):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    proc = subprocess.Popen([*NOTES, "--http", "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        assert wait_for(listening, 30)
        record = {"id": "http", "prompt": "save groceries", "reset": {"tool": "reset_notes"},
                  "check": {"kind": "calls", "calls": [ADD.to_dict()]}}
        sample = task_from_record(record, McpServer.parse(url), tools)
        assert sample.meta["env"]["server"] == {"url": url}
        for _ in range(2):  # the second episode starts from the reset store: the same add succeeds again
            env = env_for(sample)
            assert not env.step(ADD).error and env.outcome().success
    finally:
        POOL.clear()
        proc.terminate()
        proc.wait(20)


def test_servers_still_running_at_interpreter_exit_are_stopped(tools: list[ToolSpec], tmp_path: Path):
    tasks = [task(tools, "restarted"), task(tools, "pooled", reset={"tool": "reset_notes"})]
    script = tmp_path / "leave_open.py"
    script.write_text(f"""
import json, psutil
from tooltune.environments import make_environment
from tooltune.schema import Sample, ToolCall
envs = []
for raw in json.loads({json.dumps([t.to_dict() for t in tasks])!r}):
    env = make_environment("mcp")
    env.reset(Sample.from_dict(raw))
    env.step(ToolCall("list_notes", {{}}))
    envs.append(env)  # neither judged nor closed
servers = [p for p in psutil.Process().children() if "mcp.notes" in " ".join(p.cmdline())]
servers[0].suspend()  # a server that would outlive its parent: stopped, it never reads the closed stdin
print(json.dumps([p.pid for p in servers]), flush=True)
""")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    pids = json.loads(out.stdout.splitlines()[-1])
    assert len(pids) == 2

    def alive(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    assert wait_for(lambda: not any(map(alive, pids)))


# -- episodes through the driver and agentic GRPO ----------------------------------------------------

def _ids(tok: Any, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]


def test_evaluate_episodes_on_the_notes_server(
    tiny_model_dir: Path, tiny_tokenizer: Any, tools: list[ToolSpec], monkeypatch: pytest.MonkeyPatch
):
    from transformers import AutoModelForCausalLM

    from tooltune.generation import HFBackend, evaluate_episodes

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    tasks = [task(tools, f"t{i}", check={"kind": "calls", "calls": [ADD.to_dict(), APPEND.to_dict()]})
             for i in range(3)]
    real = evaluate_episodes(model, tiny_tokenizer, tasks[:2], TEMPLATE, max_turns=2, max_new_tokens=8)
    assert real["tasks"] == 2 and len(real["outcomes"]) == 2  # the untrained model's own episodes run

    def scripted(self: Any, contexts: list[list[int]], max_new_tokens: int) -> tuple:
        out = []
        for ctx in contexts:
            text = tiny_tokenizer.decode(ctx)
            turn = text.count("<|im_start|>assistant") - 1
            second = APPEND if "(t2)" not in text else ToolCall("delete_note", {"title": "groceries"})
            out.append(_ids(tiny_tokenizer, render_answer([[ADD], [second], []][min(turn, 2)], TEMPLATE)))
        return out, None

    monkeypatch.setattr(HFBackend, "generate_ids", scripted)
    result = evaluate_episodes(model, tiny_tokenizer, tasks, TEMPLATE, max_turns=4, max_new_tokens=64)
    assert result["outcomes"] == [1, 1, 0] and result["success"] == pytest.approx(2 / 3)
    assert result["turns"] == 3 and result["ends"] == {"answer": 3}


def test_agentic_grpo_steps_go_on_when_a_server_is_killed_mid_episode(
    tiny_model_dir: Path, tiny_tokenizer: Any, tools: list[ToolSpec], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    from test_training_agentic import agentic_config, task_rows

    import tooltune.training.agentic as agentic
    from tooltune.training.grpo import ToolTuneGRPOTrainer
    from tooltune.training.grpo_stage import build_reward_funcs
    from tooltune.training.runner import train

    check = {"kind": "calls", "calls": [ADD.to_dict(), APPEND.to_dict()]}
    tasks = [task(tools, f"g{i}", reset={"tool": "reset_notes"}, check=check) for i in range(2)]
    calls = {"turn": 0}
    killed: list[int] = []

    def turns(self: Any, prompt_ids: list, *a: Any) -> tuple:
        """Rollout j of a group: the right second call when j is even, a wrong one when odd; in the
        second step, one episode's server is killed before the second turn's calls run."""
        out = []
        for j, ctx in enumerate(prompt_ids):
            turn = tiny_tokenizer.decode(ctx).count("<|im_start|>assistant") - 1
            second = APPEND if j % 2 == 0 else ToolCall(APPEND.name, {**APPEND.arguments, "text": "ham"})
            out.append(_ids(tiny_tokenizer, render_answer([[ADD], [second], []][min(turn, 2)], TEMPLATE)))
        calls["turn"] += 1
        if calls["turn"] == 5:  # step 2, turn 2: kill one server now
            victim = notes_servers()[0]
            killed.append(victim.pid)
            victim.send_signal(signal.SIGKILL)
        return out, None

    episodes: list[list[Any]] = []
    run_episodes = agentic.run_episodes
    monkeypatch.setattr(agentic, "run_episodes", lambda *a, **k: episodes.append(run_episodes(*a, **k))
                        or episodes[-1])
    monkeypatch.setattr(ToolTuneGRPOTrainer, "_generate_single_turn", turns)
    cfg = agentic_config(tiny_model_dir, tmp_path / "run")
    run = train(cfg, reward_funcs=build_reward_funcs(cfg), train_rows=task_rows(tasks))
    assert len(episodes) == 2 and all(len(eps) == 8 for eps in episodes) and killed
    first, second = episodes
    assert [ep.outcome.success for ep in first] == [j % 2 == 0 for j in range(8)]
    dead = [ep for ep in second if ep.outcome.details["server"]]
    assert len(dead) == 1 and not dead[0].outcome.success
    (failed,) = [r for r in dead[0].turn_steps[0][1].results]
    assert failed.error and "closed" in failed.content and "closed" in dead[0].outcome.details["server"]
    assert sum(ep.outcome.success for ep in second) in (3, 4)  # the others were judged as usual
    recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert len([r for r in recs if "loss" in r]) == 2  # both steps trained
    assert os.path.isdir(run)


def test_tool_messages_name_the_server_without_folders(tools: list[ToolSpec]):
    """The model reads the server's short name, never its command line or folders; the outcome's
    details keep the full reason for the user."""
    sample = task(tools)
    sample.meta["env"]["server"] = ["/nonexistent/secret/dir/server", "--db", "/home/me/private.db"]
    env = env_for(sample, start_seconds=1.0)
    step = env.step(ADD)
    message = json.loads(step.content)["error"]
    assert step.error and "MCP server 'server'" in message and "did not start" in message
    assert "/nonexistent" not in message and "private.db" not in message and "secret" not in message
    assert "/nonexistent/secret/dir/server" in env.outcome().details["server"]
    assert McpServer.parse([sys.executable, "-m", "pkg.server"]).name.endswith(" -m pkg.server")
    assert McpServer.parse("https://user:token@example.com:8443/mcp?key=1").name == "https://example.com:8443"
