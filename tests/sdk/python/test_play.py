"""The official Python Agent SDK (`claude-agent-sdk`) with `ccwire play` as its CLI: an app runs
a recorded session with no model, the example of docs/USING.md runs as written, and a changed decision
fails with a clear message."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import anyio
import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
)

from conftest import CCWIRE_BIN, REPO

TAPE = REPO / "tests/corpus/b_bash_allow.jsonl"
PROMPT = "Run echo hi in the shell, writing it to out.txt."


def player(directory: Path, *options: str) -> Path:
    """A `claude` that plays the tape, as the script of docs/USING.md does."""
    script = directory / "claude-from-tape"
    script.write_text(
        f"#!/bin/sh\nexec '{CCWIRE_BIN}' play '{TAPE}' --instant {' '.join(options)} -- \"$@\"\n"
    )
    script.chmod(0o755)
    return script


def recorded_result() -> str:
    for line in TAPE.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("msg", {}).get("type") == "result":
            return entry["msg"]["result"]
    raise AssertionError("the tape has a result")


async def run(cli: Path, decide, stderr: list[str]) -> ResultMessage:
    options = ClaudeAgentOptions(cli_path=str(cli), can_use_tool=decide, stderr=stderr.append)
    async with ClaudeSDKClient(options=options) as client:
        await client.query(PROMPT)
        async for message in client.receive_response():
            if isinstance(message, ResultMessage):
                return message
    raise AssertionError("no result")


def test_an_app_on_the_sdk_gets_the_recorded_session(tmp_path):
    asked = []

    async def allow(tool_name, tool_input, context):
        asked.append((tool_name, tool_input["command"]))
        return PermissionResultAllow()

    result = anyio.run(run, player(tmp_path, "--verify"), allow, [])
    assert result.result == recorded_result()
    assert not result.is_error
    assert asked == [("Bash", "echo hi > out.txt")]


def test_verify_fails_an_app_that_denies_what_was_allowed(tmp_path):
    async def deny(tool_name, tool_input, context):
        return PermissionResultDeny(message="No shell here.")

    stderr: list[str] = []
    with pytest.raises(Exception):
        anyio.run(run, player(tmp_path, "--verify"), deny, stderr)
    said = "\n".join(stderr)
    assert "diverged" in said and '"deny"' in said and "No shell here." in said, said


def test_the_readme_example_runs_and_prints_what_it_says(tmp_path):
    text = (REPO / "docs" / "USING.md").read_text()
    section = text.split("## Testing your app against recordings", 1)[1].split("\n## ", 1)[0]
    (script,) = re.findall(r"```sh\n(.*?)```", section, re.S)
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    (printed,) = re.findall(r"```text\n(.*?)```", section, re.S)
    wrapper = tmp_path / "claude-from-tape"
    wrapper.write_text(script.replace("exec ccwire", f"exec '{CCWIRE_BIN}'").replace("tape.jsonl", str(TAPE)))
    wrapper.chmod(0o755)
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "docs/USING.md", "exec"), {"__name__": "readme"})
    finally:
        os.chdir(cwd)
    assert out.getvalue() == printed


def tape_player(directory: Path, tape: str, *options: str) -> Path:
    script = directory / f"claude-{tape}"
    script.write_text(
        f"#!/bin/sh\nexec '{CCWIRE_BIN}' play '{REPO}/tests/corpus/{tape}.jsonl' --instant "
        f"{' '.join(options)} -- \"$@\"\n"
    )
    script.chmod(0o755)
    return script


def result_of(tape: str) -> str:
    for line in (REPO / f"tests/corpus/{tape}.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry.get("msg", {}).get("type") == "result":
            return entry["msg"].get("result", "")
    raise AssertionError("the tape has a result")


async def one_turn(options: ClaudeAgentOptions, prompt: str, on_message=None) -> ResultMessage:
    async with ClaudeSDKClient(options=options) as client:
        await client.query(prompt)
        async for message in client.receive_response():
            if on_message:
                await on_message(client, message)
            if isinstance(message, ResultMessage):
                return message
    raise AssertionError("no result")


def test_hooks_are_called_with_the_recorded_inputs(tmp_path):
    from claude_agent_sdk import HookMatcher

    calls = []

    async def pre(input_data, tool_use_id, context):
        calls.append(("PreToolUse", input_data["tool_name"]))
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "permissionDecisionReason": "allowed by the recording hook"}}

    async def post(input_data, tool_use_id, context):
        calls.append(("PostToolUse", input_data["tool_name"]))
        return {}

    options = ClaudeAgentOptions(
        cli_path=str(tape_player(tmp_path, "i_hook_pretooluse")),
        hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[pre])],
               "PostToolUse": [HookMatcher(matcher=None, hooks=[post])]},
    )
    result = anyio.run(one_turn, options, "Echo something in the shell.")
    assert result.result == result_of("i_hook_pretooluse")
    assert calls == [("PreToolUse", "Bash"), ("PostToolUse", "Bash")]


def test_an_in_process_mcp_tool_is_called_by_the_recorded_model(tmp_path):
    from claude_agent_sdk import create_sdk_mcp_server, tool

    called = []

    @tool("add", "Add two numbers", {"a": float, "b": float})
    async def add(args):
        called.append((args["a"], args["b"]))
        return {"content": [{"type": "text", "text": str(int(args["a"] + args["b"]))}]}

    options = ClaudeAgentOptions(
        cli_path=str(tape_player(tmp_path, "d_sdk_mcp")),
        mcp_servers={"calc": create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add])},
        allowed_tools=["mcp__calc__add"],
    )
    result = anyio.run(one_turn, options, "Use the calc tool to add 2 and 3.")
    assert called == [(2, 3)]
    assert result.result == result_of("d_sdk_mcp")


def test_an_interrupt_is_answered_from_the_tape(tmp_path):
    from claude_agent_sdk import AssistantMessage, ToolUseBlock

    interrupted = []

    async def interrupt_at_the_tool(client, message):
        if isinstance(message, AssistantMessage) and any(
            isinstance(b, ToolUseBlock) for b in message.content
        ) and not interrupted:
            interrupted.append(True)
            await client.interrupt()

    options = ClaudeAgentOptions(cli_path=str(tape_player(tmp_path, "g_interrupt_tool", "--verify")))
    result = anyio.run(one_turn, options, "Sleep for a while in the shell.", interrupt_at_the_tool)
    assert interrupted
    assert result.subtype == "error_during_execution"
