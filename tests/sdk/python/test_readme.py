"""The Python examples of `ccwire serve`'s reference (docs/SERVE.md, and the README's copy of
its first), run as written (only the address and key changed) against the gateway, the real
CLI and the fake model."""

from __future__ import annotations

import contextlib
import io
import re

from conftest import API_KEY, REPO

README_SCRIPT = {
    "rules": [
        {"when": {"kind": "probe"}, "reply": {"kind": "text", "text": "ok"}},
        {"when": {"kind": "tool_result"}, "reply": {"kind": "echo"}},
        {
            "when": {"kind": "last_user_contains", "text": "Weather in Paris and in Rome?"},
            "reply": {
                "kind": "tool_use",
                "text": "Checking both cities.",
                "calls": [
                    {"name": "mcp__client__get_weather", "input": {"city": "Paris"}},
                    {"name": "mcp__client__get_weather", "input": {"city": "Rome"}},
                ],
            },
        },
        {"when": {"kind": "any"}, "reply": {"kind": "text", "text": "Hello from the README."}},
    ]
}


def serve_examples() -> list[str]:
    text = (REPO / "docs" / "SERVE.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_readme_shows_the_reference_s_first_example():
    text = (REPO / "README.md").read_text()
    section = text.split("## `ccwire serve` in short", 1)[1].split("\n## ", 1)[0]
    (shown,) = re.findall(r"```python\n(.*?)```", section, re.S)
    assert shown == serve_examples()[0]


def test_the_readme_examples_run_against_the_gateway(rig):
    rig.fake.set_script(README_SCRIPT)
    examples = serve_examples()
    assert len(examples) == 3, "the client example, the tool loop and a Managed Agents session"
    code = "\n".join(examples)
    assert "http://127.0.0.1:8787" in code and "your-ccwire-key" in code
    code = code.replace("http://127.0.0.1:8787", rig.url).replace("your-ccwire-key", API_KEY)
    before = set(rig.gateway.cli_pids())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/SERVE.md", "exec"), {})
    lines = out.getvalue().splitlines()
    # Both clients get their answer, then the tool loop ends with the model's final text.
    assert lines[0] == "Hello from the README.", lines
    assert lines[1] == "Hello from the README.", lines
    final = "\n".join(lines[2:-1])
    assert "Sunny in Paris" in final and "Sunny in Rome" in final, final
    # The session's agent answered on its event stream.
    assert lines[-1] == "Hello from the README.", lines
    # The model got both results, for the calls it made, in one request.
    last = rig.fake.calls_with("tool_result")[-1]["body"]["messages"][-1]["content"]
    results = [b for b in last if b.get("type") == "tool_result"]
    assert len(results) == 2, last
    # Four conversations (two plain, one with tools, the session's), one process each.
    assert len(set(rig.gateway.cli_pids()) - before) == 4
