"""The official Python Agent SDK (`claude-agent-sdk`) with `ccwire play` as its CLI: an app runs
a recorded session with no model, the README's example runs as written, and a changed decision
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
    """A `claude` that plays the tape, as the README's script does."""
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
    text = (REPO / "README.md").read_text()
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
            exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    finally:
        os.chdir(cwd)
    assert out.getvalue() == printed
