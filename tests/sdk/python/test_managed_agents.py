"""The Managed Agents API (`client.beta.agents`, `.environments`, `.sessions`) of the official
`anthropic` Python SDK, unchanged, against `ccwire serve` (real CLI, fake model)."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time

import anthropic
import pytest

from conftest import API_KEY, CLIENT_TIMEOUT_S, OTHER_API_KEY, rig_with


@pytest.fixture(scope="module")
def rig():
    # The gateway runs the CLI's Bash for the agents whose toolset has it, and lets agents use
    # URL MCP servers.
    yield from rig_with("--enable-tool", "Bash", "--allow-mcp-servers")


class _McpServer:
    """A streamable HTTP MCP server on loopback with one tool, `search`, that records its calls."""

    def __init__(self):
        calls = self.calls = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                # No server-initiated stream.
                self.send_response(405)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_DELETE(self):
                self.do_GET()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if "id" not in body:
                    self.send_response(202)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                method, params = body["method"], body.get("params") or {}
                if method == "initialize":
                    result = {
                        "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "docs", "version": "1.0.0"},
                    }
                elif method == "tools/list":
                    result = {
                        "tools": [
                            {
                                "name": "search",
                                "description": "Searches the docs.",
                                "inputSchema": {
                                    "type": "object",
                                    "properties": {"q": {"type": "string"}},
                                    "required": ["q"],
                                },
                            }
                        ]
                    }
                elif method == "tools/call":
                    calls.append(params)
                    query = params["arguments"]["q"]
                    result = {"content": [{"type": "text", "text": f"found docs for {query}"}]}
                else:
                    result = {}
                data = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/mcp"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def make_client(rig, api_key: str = API_KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=rig.url, api_key=api_key, timeout=CLIENT_TIMEOUT_S
    )


@pytest.fixture
def client(rig):
    with make_client(rig) as c:
        yield c


@pytest.fixture
def other(rig):
    with make_client(rig, OTHER_API_KEY) as c:
        yield c


def test_an_agent_is_created_versioned_listed_and_archived(client, other):
    agent = client.beta.agents.create(
        name="Reviewer",
        model="claude-sonnet-4-6",
        system="Review code.",
        tools=[
            {
                "type": "agent_toolset_20260401",
                "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}],
            },
            {
                "type": "custom",
                "name": "lookup",
                "description": "Looks a record up.",
                "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
        ],
        metadata={"team": "platform"},
    )
    assert agent.id.startswith("agent_") and agent.version == 1
    assert agent.model.id == "claude-sonnet-4-6"
    toolset = agent.tools[0]
    bash = next(c for c in toolset.configs if c.name == "bash")
    read = next(c for c in toolset.configs if c.name == "read")
    assert (bash.permission_policy.type, read.permission_policy.type) == (
        "always_ask",
        "always_allow",
    )
    assert agent.created_at.tzinfo is not None

    updated = client.beta.agents.update(agent.id, version=1, system="Review code, briefly.")
    assert updated.version == 2
    with pytest.raises(anthropic.ConflictError):
        client.beta.agents.update(agent.id, version=1, system="Stale.")
    assert client.beta.agents.retrieve(agent.id, version=1).system == "Review code."
    assert [a.version for a in client.beta.agents.versions.list(agent.id)] == [2, 1]

    # Another key sees none of it.
    with pytest.raises(anthropic.NotFoundError):
        other.beta.agents.retrieve(agent.id)
    assert [a.id for a in other.beta.agents.list()] == []

    # The SDK's auto-pagination walks every page and stops.
    made = [
        client.beta.agents.create(name=f"Page {i}", model="claude-haiku-4-5").id for i in range(5)
    ]
    listed = [a.id for a in client.beta.agents.list(limit=2)]
    assert listed[:5] == list(reversed(made))
    assert agent.id in listed

    client.beta.agents.archive(agent.id)
    assert agent.id not in [a.id for a in client.beta.agents.list(limit=100)]
    assert agent.id in [a.id for a in client.beta.agents.list(limit=100, include_archived=True)]

    with pytest.raises(anthropic.BadRequestError, match="skills"):
        client.beta.agents.create(
            name="Skilled", model="claude-sonnet-4-6", skills=[{"type": "anthropic", "skill_id": "xlsx"}]
        )


def test_an_environment_is_local_and_says_what_cannot_apply(client, other):
    raw = client.beta.environments.with_raw_response.create(
        name="dev",
        config={"type": "cloud", "networking": {"type": "limited", "allowed_hosts": ["pypi.org"]}},
    )
    env = raw.parse()
    assert env.id.startswith("env_") and env.config.type == "cloud"
    assert "config.networking (limited)" in raw.headers["x-ccwire-warning"]

    env = client.beta.environments.update(env.id, description="mine", metadata={"k": "v"})
    assert (env.description, env.metadata) == ("mine", {"k": "v"})
    with pytest.raises(anthropic.NotFoundError):
        other.beta.environments.retrieve(env.id)
    with pytest.raises(anthropic.BadRequestError, match="self_hosted"):
        client.beta.environments.create(name="remote", config={"type": "self_hosted"})

    assert env.id in [e.id for e in client.beta.environments.list()]
    deleted = client.beta.environments.delete(env.id)
    assert (deleted.id, deleted.type) == (env.id, "environment_deleted")
    assert env.id not in [e.id for e in client.beta.environments.list(include_archived=True)]


SCRIPT_NOTE = "the fake model echoes: 'You said: <the last user message>'"


def _agent_and_environment(client):
    agent = client.beta.agents.create(
        name="Session agent",
        model="claude-sonnet-4-5-20250929",
        system="Answer briefly.",
        tools=[
            {
                "type": "custom",
                "name": "lookup",
                "description": "Looks a record up.",
                "input_schema": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                    "required": ["query"],
                },
            }
        ],
    )
    environment = client.beta.environments.create(name="local")
    return agent, environment


def _until_idle(stream):
    """The events of a stream up to and including the next `session.status_idle`."""
    seen = []
    for event in stream:
        seen.append(event)
        if event.type == "session.status_idle":
            return seen
    raise AssertionError(f"the stream ended before the session was idle: {seen}")


def test_a_session_answers_a_message_on_its_event_stream(client, other):
    agent, environment = _agent_and_environment(client)
    session = client.beta.sessions.create(
        agent=agent.id, environment_id=environment.id, title="hello"
    )
    assert session.id.startswith("sesn_") and session.status == "idle"
    assert session.agent.id == agent.id and session.agent.version == 1

    stream = client.beta.sessions.events.stream(session.id)
    client.beta.sessions.events.send(
        session.id,
        events=[
            {
                "type": "user.message",
                "content": [{"type": "text", "text": "SESSION-HELLO from the SDK"}],
            }
        ],
    )
    events = _until_idle(stream)
    stream.close()
    kinds = [e.type for e in events]
    assert kinds[0] == "user.message" and "session.status_running" in kinds, kinds
    messages = [e for e in events if e.type == "agent.message"]
    assert messages and "SESSION-HELLO from the SDK" in messages[-1].content[0].text
    assert events[-1].stop_reason.type == "end_turn"

    # The log holds the same events, in order; the session counts its tokens.
    logged = [e.id for e in client.beta.sessions.events.list(session.id)]
    assert logged == [e.id for e in events]
    session = client.beta.sessions.retrieve(session.id)
    assert session.status == "idle" and session.usage.output_tokens > 0

    # Another key sees none of it.
    with pytest.raises(anthropic.NotFoundError):
        other.beta.sessions.retrieve(session.id)
    assert session.id not in [s.id for s in other.beta.sessions.list()]
    assert session.id in [s.id for s in client.beta.sessions.list()]


def test_a_stream_that_asks_previews_the_agent_s_words_as_they_come(client):
    agent, environment = _agent_and_environment(client)
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    stream = client.beta.sessions.events.stream(session.id, event_deltas=["agent.message"])
    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.message", "content": [{"type": "text", "text": "PREVIEW-ME please"}]}],
    )
    events = _until_idle(stream)
    stream.close()
    starts = [e for e in events if e.type == "event_start"]
    assert [s.event.type for s in starts] == ["agent.message"], events
    preview = starts[0].event.id
    deltas = [e for e in events if e.type == "event_delta"]
    assert deltas and all(d.event_id == preview for d in deltas)
    text = "".join(d.delta.content.text for d in deltas)
    message = next(e for e in events if e.type == "agent.message")
    assert message.id == preview and message.content[0].text == text
    assert "PREVIEW-ME please" in text
    assert events.index(starts[0]) < events.index(deltas[0]) < events.index(message)
    # Previews are never in the log.
    logged = [e.type for e in client.beta.sessions.events.list(session.id)]
    assert "event_start" not in logged and "event_delta" not in logged
    assert message.id in [e.id for e in client.beta.sessions.events.list(session.id)]


def test_a_custom_tool_is_called_and_its_result_continues_the_turn(client):
    agent, environment = _agent_and_environment(client)
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    stream = client.beta.sessions.events.stream(session.id)
    client.beta.sessions.events.send(
        session.id,
        events=[
            {
                "type": "user.message",
                "content": [{"type": "text", "text": "PLEASE-TWO lookups for the session"}],
            }
        ],
    )
    events = _until_idle(stream)
    calls = [e for e in events if e.type == "agent.custom_tool_use"]
    assert [c.name for c in calls] == ["lookup", "lookup"]
    idle = events[-1]
    assert idle.stop_reason.type == "requires_action"
    assert sorted(idle.stop_reason.event_ids) == sorted(c.id for c in calls)

    client.beta.sessions.events.send(
        session.id,
        events=[
            {
                "type": "user.custom_tool_result",
                "custom_tool_use_id": call.id,
                "content": [{"type": "text", "text": f"record of {call.input['query']}"}],
            }
            for call in calls
        ],
    )
    events = _until_idle(stream)
    stream.close()
    assert events[-1].stop_reason.type == "end_turn"
    answer = [e for e in events if e.type == "agent.message"][-1].content[0].text
    # The model was given the results (the fake echoes them back).
    assert "record of alpha" in answer and "record of beta" in answer, answer


def test_an_interrupt_stops_the_turn_and_the_session_goes_on(client):
    agent, environment = _agent_and_environment(client)
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    say = lambda text: client.beta.sessions.events.send(  # noqa: E731
        session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}]
    )
    stream = client.beta.sessions.events.stream(session.id)
    say("INTERRUPT-FIRST hello")
    _until_idle(stream)
    say("PLEASE-SLOW INTERRUPT-SECOND")
    for event in stream:
        if event.type == "span.model_request_start":
            break
    client.beta.sessions.events.send(session.id, events=[{"type": "user.interrupt"}])
    events = _until_idle(stream)
    assert events[-1].stop_reason.type == "end_turn"
    assert client.beta.sessions.retrieve(session.id).status == "idle"
    say("PLEASE-AFTER INTERRUPT-THIRD")
    events = _until_idle(stream)
    stream.close()
    assert events[-1].stop_reason.type == "end_turn"
    answer = [e for e in events if e.type == "agent.message"][-1].content[0].text
    assert "INTERRUPT-THIRD" in answer, answer


def test_a_session_goes_on_after_the_gateway_restarts(rig):
    client = make_client(rig)
    agent, environment = _agent_and_environment(client)
    session = client.beta.sessions.create(
        agent=agent.id,
        environment_id=environment.id,
        initial_events=[
            {"type": "user.message", "content": [{"type": "text", "text": "RESTART-FIRST turn"}]}
        ],
    )
    stream = client.beta.sessions.events.stream(session.id)
    if client.beta.sessions.retrieve(session.id).status != "idle":
        _until_idle(stream)
    stream.close()
    before = [e.id for e in client.beta.sessions.events.list(session.id)]
    assert len(before) > 3

    rig.restart()
    client = make_client(rig)
    assert [e.id for e in client.beta.sessions.events.list(session.id)] == before
    assert client.beta.agents.retrieve(agent.id).name == agent.name
    stream = client.beta.sessions.events.stream(session.id)
    client.beta.sessions.events.send(
        session.id,
        events=[
            {"type": "user.message", "content": [{"type": "text", "text": "RESTART-SECOND turn"}]}
        ],
    )
    events = _until_idle(stream)
    stream.close()
    assert "RESTART-SECOND turn" in [e for e in events if e.type == "agent.message"][-1].content[0].text
    # The model saw the whole conversation, the turn before the restart included.
    last = rig.fake.calls_with("RESTART-SECOND turn")[-1]
    assert "RESTART-FIRST turn" in json.dumps(last["body"]["messages"])


def _shell_session(client):
    """A session of an agent whose built-in toolset asks before each bash call."""
    agent = client.beta.agents.create(
        name="Shell agent",
        model="claude-sonnet-4-5-20250929",
        tools=[
            {
                "type": "agent_toolset_20260401",
                "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}],
            }
        ],
    )
    environment = client.beta.environments.create(name="shell")
    raw = client.beta.sessions.with_raw_response.create(
        agent=agent.id, environment_id=environment.id
    )
    # The toolset's other tools are not enabled on this gateway: the session says so.
    warning = raw.headers.get("x-ccwire-warning", "")
    assert "read" in warning and "--enable-tool" in warning, warning
    return raw.parse()


def _say(client, session, text):
    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}],
    )


def test_a_bash_call_asks_first_and_runs_once_confirmed_or_not_at_all_once_denied(client, other):
    session = _shell_session(client)
    stream = client.beta.sessions.events.stream(session.id)

    # Confirmed: it runs, in the session's own directory, and the model is given its output.
    _say(client, session, "PLEASE-BASH first")
    events = _until_idle(stream)
    call = next(e for e in events if e.type == "agent.tool_use")
    assert (call.name, call.evaluated_permission) == ("bash", "ask")
    assert "echo bash-ran" in call.input["command"]
    assert events[-1].stop_reason.type == "requires_action"
    assert events[-1].stop_reason.event_ids == [call.id]
    assert client.beta.sessions.retrieve(session.id).status == "idle"
    # Nobody else can answer it.
    with pytest.raises(anthropic.NotFoundError):
        other.beta.sessions.events.send(
            session.id,
            events=[{"type": "user.tool_confirmation", "tool_use_id": call.id, "result": "allow"}],
        )
    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.tool_confirmation", "tool_use_id": call.id, "result": "allow"}],
    )
    events = _until_idle(stream)
    result = next(e for e in events if e.type == "agent.tool_result")
    assert result.tool_use_id == call.id and not result.is_error
    output = result.content[0].text
    assert "bash-ran in /" in output and f"/sessions/{session.id}" in output, output
    assert events[-1].stop_reason.type == "end_turn"
    answer = [e for e in events if e.type == "agent.message"][-1].content[0].text
    assert "bash-ran in" in answer, answer

    # Denied: it does not run, and the model is told why.
    _say(client, session, "PLEASE-BASH second")
    events = _until_idle(stream)
    call = next(e for e in events if e.type == "agent.tool_use")
    client.beta.sessions.events.send(
        session.id,
        events=[
            {
                "type": "user.tool_confirmation",
                "tool_use_id": call.id,
                "result": "deny",
                "deny_message": "Not on this machine.",
            }
        ],
    )
    events = _until_idle(stream)
    stream.close()
    result = next(e for e in events if e.type == "agent.tool_result")
    assert result.is_error and "Not on this machine." in result.content[0].text
    assert "bash-ran" not in result.content[0].text
    answer = [e for e in events if e.type == "agent.message"][-1].content[0].text
    assert "Not on this machine." in answer, answer
    # The log has both calls and their confirmations, in order.
    kinds = [e.type for e in client.beta.sessions.events.list(session.id, limit=1000)]
    assert kinds.count("agent.tool_use") == 2 and kinds.count("user.tool_confirmation") == 2


def test_a_deleted_session_s_directory_is_deleted_with_what_its_tools_wrote(client, other):
    session = _shell_session(client)
    stream = client.beta.sessions.events.stream(session.id)
    _say(client, session, "PLEASE-BASH here")
    call = next(e for e in _until_idle(stream) if e.type == "agent.tool_use")
    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.tool_confirmation", "tool_use_id": call.id, "result": "allow"}],
    )
    result = next(e for e in _until_idle(stream) if e.type == "agent.tool_result")
    stream.close()
    # "bash-ran in <its directory>"
    directory = result.content[0].text.split("bash-ran in ", 1)[1].split()[0]
    assert directory.endswith(f"/sessions/{session.id}") and os.path.isdir(directory), directory

    with pytest.raises(anthropic.NotFoundError):
        other.beta.sessions.delete(session.id)
    assert os.path.isdir(directory)
    assert client.beta.sessions.delete(session.id).id == session.id
    deadline = time.monotonic() + 20
    while os.path.exists(directory) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(directory), "the deleted session's directory is gone"
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.retrieve(session.id)


def test_a_dropped_stream_is_picked_up_with_no_event_lost_or_repeated(client):
    agent, environment = _agent_and_environment(client)
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    stream = client.beta.sessions.events.stream(session.id)
    _say(client, session, "DROP-FIRST turn")
    seen = []
    for event in stream:
        seen.append(event)
        if event.type == "session.status_running":
            break
    # The connection drops mid-turn; the turn goes on meanwhile.
    stream.close()
    _until_idle_in_log(client, session)

    # Reopened after the last event seen (`Last-Event-ID`): the stream gives what came since.
    stream = client.beta.sessions.events.stream(
        session.id, extra_headers={"Last-Event-ID": seen[-1].id}
    )
    seen += _until_idle(stream)
    stream.close()
    # Or, as the SDK's own runner does, the log after the last event seen.
    missed = list(client.beta.sessions.events.list(session.id, page=seen[2].id))
    logged = [e.id for e in client.beta.sessions.events.list(session.id)]
    assert [e.id for e in seen] == logged
    assert [e.id for e in missed] == logged[3:]


def _until_idle_in_log(client, session, timeout_s: float = 20):
    import time

    deadline = time.monotonic() + timeout_s
    while client.beta.sessions.retrieve(session.id).status != "idle":
        assert time.monotonic() < deadline, "the session did not go idle"
        time.sleep(0.05)


def test_an_mcp_server_s_tool_runs_by_its_toolset_s_policy(client):
    server = _McpServer()
    try:
        agent = client.beta.agents.create(
            name="Docs agent",
            model="claude-sonnet-4-5-20250929",
            mcp_servers=[{"type": "url", "name": "docs", "url": server.url}],
            tools=[
                {
                    "type": "mcp_toolset",
                    "mcp_server_name": "docs",
                    "default_config": {"permission_policy": {"type": "always_allow"}},
                }
            ],
        )
        environment = client.beta.environments.create(name="docs")
        session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
        stream = client.beta.sessions.events.stream(session.id)
        _say(client, session, "PLEASE-MCP find the docs")
        events = _until_idle(stream)
        stream.close()
    finally:
        server.close()
    call = next(e for e in events if e.type == "agent.mcp_tool_use")
    assert (call.mcp_server_name, call.name, call.input) == ("docs", "search", {"q": "ccwire"})
    assert call.evaluated_permission == "allow"
    result = next(e for e in events if e.type == "agent.mcp_tool_result")
    assert result.mcp_tool_use_id == call.id and not result.is_error
    assert result.content[0].text == "found docs for ccwire"
    assert server.calls and server.calls[0]["arguments"] == {"q": "ccwire"}
    assert events[-1].stop_reason.type == "end_turn"


# A 1×1 PNG.
PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def test_a_message_s_image_and_document_reach_the_model(client, rig):
    agent, environment = _agent_and_environment(client)
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    stream = client.beta.sessions.events.stream(session.id)
    client.beta.sessions.events.send(
        session.id,
        events=[
            {
                "type": "user.message",
                "content": [
                    {"type": "text", "text": "DOC-AND-IMAGE what do these say?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG_1X1},
                    },
                    {
                        "type": "document",
                        "source": {
                            "type": "text",
                            "media_type": "text/plain",
                            "data": "The secret word is kiwi.",
                        },
                        "title": "note",
                    },
                ],
            }
        ],
    )
    events = _until_idle(stream)
    stream.close()
    assert events[-1].stop_reason.type == "end_turn"
    request = rig.fake.calls_with("DOC-AND-IMAGE")[-1]["body"]
    blocks = request["messages"][-1]["content"]
    kinds = [b["type"] for b in blocks]
    assert "image" in kinds and "document" in kinds, kinds
    image = next(b for b in blocks if b["type"] == "image")
    document = next(b for b in blocks if b["type"] == "document")
    assert image["source"]["data"] == PNG_1X1
    assert document["source"]["data"] == "The secret word is kiwi."
