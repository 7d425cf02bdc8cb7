"""The Managed Agents API (`client.beta.agents`, `.environments`, `.sessions`) of the official
`anthropic` Python SDK, unchanged, against `ccwire serve` (real CLI, fake model)."""

from __future__ import annotations

import json

import anthropic
import pytest

from conftest import API_KEY, CLIENT_TIMEOUT_S, OTHER_API_KEY


def make_client(rig, api_key: str = API_KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=rig.url, api_key=api_key, max_retries=0, timeout=CLIENT_TIMEOUT_S
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
