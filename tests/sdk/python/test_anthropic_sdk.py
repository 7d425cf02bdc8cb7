"""The official `anthropic` Python SDK, unchanged, against `ccwire serve` (real CLI, fake model)."""

from __future__ import annotations

import json
import time

import anthropic
import pytest

from conftest import (
    CLIENT_TIMEOUT_S,
    ANTHROPIC_MODEL,
    API_KEY,
    HELD_CALL_TIMEOUT_TEXT,
    LOOKUP_TOOL_ANTHROPIC,
    record_for,
    wait_for,
)


def make_client(rig, api_key: str = API_KEY) -> anthropic.Anthropic:
    """The SDK as an application sets it up (its own retries included), on the gateway."""
    return anthropic.Anthropic(
        base_url=rig.url, api_key=api_key, timeout=CLIENT_TIMEOUT_S
    )


@pytest.fixture
def client(rig):
    with make_client(rig) as c:
        yield c


def create(client, messages, **kwargs):
    """A non-streaming request with its raw response: (x-ccwire-session, Message)."""
    kwargs.setdefault("tools", [LOOKUP_TOOL_ANTHROPIC])
    raw = client.messages.with_raw_response.create(
        model=ANTHROPIC_MODEL, max_tokens=1024, messages=messages, **kwargs
    )
    return raw.headers.get("x-ccwire-session"), raw.parse()


def text_of(message) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def tool_uses(message):
    return [b for b in message.content if b.type == "tool_use"]


def run_tools(message) -> list[dict]:
    """What the client's tools answer for the model's calls, as tool_result blocks."""
    results = []
    for call in tool_uses(message):
        assert call.name == "lookup", "the client sees its own tool name"
        results.append(
            {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": record_for(call.input["query"]),
            }
        )
    return results


def last_user_results(call: dict) -> list[dict]:
    """The tool_result blocks of the last user message of a model call."""
    # The CLI may put system turns after the last user message.
    content = [m for m in call["body"]["messages"] if m["role"] == "user"][-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def result_text(block: dict) -> str:
    content = block["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def new_pid(rig, before: set[int]) -> int:
    added = rig.gateway.cli_pids() - before
    assert len(added) == 1, f"one new CLI process for the conversation, got {added}"
    return added.pop()


def test_text_answer(rig, client):
    marker = "[anthropic-text]"
    before = rig.gateway.cli_pids()
    kind, message = create(
        client,
        [{"role": "user", "content": f"Say hello {marker}"}],
        system="Be brief. SYSTEM-A1",
        tools=anthropic.omit,
    )
    assert kind == "new"
    assert message.role == "assistant"
    assert message.stop_reason == "end_turn"
    assert message.model == ANTHROPIC_MODEL
    assert f"Say hello {marker}" in text_of(message)
    assert message.usage.output_tokens > 0
    new_pid(rig, before)
    (call,) = rig.fake.calls_with(marker)
    assert "SYSTEM-A1" in json.dumps(call["body"]["system"]), "the system prompt reached the model"
    assert call["body"]["stream"] is True


def test_streamed_answer(rig, client):
    marker = "[anthropic-stream]"
    with client.messages.stream(
        model=ANTHROPIC_MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": f"Stream this back {marker}"}],
    ) as stream:
        assert stream.response.headers.get("x-ccwire-session") == "new"
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) > 1, f"token streaming, not one block: {pieces}"
    streamed = "".join(pieces)
    assert f"Stream this back {marker}" in streamed
    assert streamed == text_of(final)
    assert final.stop_reason == "end_turn"
    assert len(rig.fake.calls_with(marker)) == 1


def test_tool_round_trip(rig, client):
    marker = "[anthropic-tool]"
    before = rig.gateway.cli_pids()
    messages = [{"role": "user", "content": f"PLEASE-LOOKUP alpha {marker}"}]
    kind, message = create(client, messages)
    assert kind == "new"
    assert message.stop_reason == "tool_use"
    (call,) = tool_uses(message)
    assert call.name == "lookup"
    assert call.input == {"query": "alpha"}
    pid = new_pid(rig, before)
    # What the model was offered and called: the client's tool under the MCP name.
    (first,) = rig.fake.calls_with(marker)
    offered = [t["name"] for t in first["body"]["tools"]]
    assert "mcp__client__lookup" in offered, offered

    messages += [
        {"role": "assistant", "content": message.content},
        {"role": "user", "content": run_tools(message)},
    ]
    kind, answer = create(client, messages)
    assert kind == "continued"
    assert answer.stop_reason == "end_turn"
    assert record_for("alpha") in text_of(answer)
    assert pid in rig.gateway.cli_pids()
    # The model got the client's result for its own call, in the same conversation.
    calls = rig.fake.calls_with(marker)
    assert len(calls) == 2
    (result,) = last_user_results(calls[-1])
    assert result["tool_use_id"] == call.id
    assert result_text(result).startswith(record_for("alpha"))
    assistant = calls[-1]["body"]["messages"][-2]
    assert any(
        b.get("type") == "tool_use" and b.get("name") == "mcp__client__lookup"
        for b in assistant["content"]
    ), assistant


def test_streamed_tool_round_trip(rig, client):
    marker = "[anthropic-stream-tool]"
    messages = [{"role": "user", "content": f"PLEASE-LOOKUP alpha {marker}"}]
    with client.messages.stream(
        model=ANTHROPIC_MODEL, max_tokens=1024, tools=[LOOKUP_TOOL_ANTHROPIC], messages=messages
    ) as stream:
        assert stream.response.headers.get("x-ccwire-session") == "new"
        events = [event.type for event in stream]
        message = stream.get_final_message()
    assert events[0] == "message_start"
    assert "input_json" in events, events
    assert message.stop_reason == "tool_use"
    (call,) = tool_uses(message)
    assert (call.name, call.input) == ("lookup", {"query": "alpha"})

    messages += [
        {"role": "assistant", "content": message.content},
        {"role": "user", "content": run_tools(message)},
    ]
    with client.messages.stream(
        model=ANTHROPIC_MODEL, max_tokens=1024, tools=[LOOKUP_TOOL_ANTHROPIC], messages=messages
    ) as stream:
        assert stream.response.headers.get("x-ccwire-session") == "continued"
        streamed = "".join(stream.text_stream)
        answer = stream.get_final_message()
    assert record_for("alpha") in streamed
    assert answer.stop_reason == "end_turn"
    (result,) = last_user_results(rig.fake.calls_with(marker)[-1])
    assert result["tool_use_id"] == call.id
    assert result_text(result).startswith(record_for("alpha"))


def test_two_tool_calls_in_one_message(rig, client):
    marker = "[anthropic-two]"
    before = rig.gateway.cli_pids()
    messages = [{"role": "user", "content": f"PLEASE-TWO lookups {marker}"}]
    kind, message = create(client, messages)
    assert kind == "new"
    assert message.stop_reason == "tool_use"
    assert "Looking both up." in text_of(message)
    calls = tool_uses(message)
    assert [(c.name, c.input) for c in calls] == [
        ("lookup", {"query": "alpha"}),
        ("lookup", {"query": "beta"}),
    ], "both calls of the model's message, in order"
    assert calls[0].id != calls[1].id
    pid = new_pid(rig, before)

    messages += [
        {"role": "assistant", "content": message.content},
        {"role": "user", "content": run_tools(message)},
    ]
    kind, answer = create(client, messages)
    assert kind == "continued"
    assert record_for("alpha") in text_of(answer)
    assert record_for("beta") in text_of(answer)
    assert rig.gateway.cli_pids() - before == {pid}
    model_calls = rig.fake.calls_with(marker)
    assert len(model_calls) == 2, "both results went to the model in one follow-up"
    # The CLI may append a <system-reminder> to the last result's text.
    results = {r["tool_use_id"]: result_text(r) for r in last_user_results(model_calls[-1])}
    assert results.keys() == {calls[0].id, calls[1].id}
    assert results[calls[0].id].startswith(record_for("alpha"))
    assert results[calls[1].id].startswith(record_for("beta"))


def test_third_turn_continues_the_same_process(rig, client):
    marker = "[anthropic-third]"
    before = rig.gateway.cli_pids()
    messages = [{"role": "user", "content": f"PLEASE-LOOKUP first {marker}"}]
    kind, message = create(client, messages)
    assert kind == "new"
    pid = new_pid(rig, before)
    messages += [
        {"role": "assistant", "content": message.content},
        {"role": "user", "content": run_tools(message)},
    ]
    kind, answer = create(client, messages)
    assert kind == "continued"
    messages += [
        {"role": "assistant", "content": answer.content},
        {"role": "user", "content": "Now the third turn THIRD-TURN-A"},
    ]
    kind, third = create(client, messages)
    assert kind == "continued"
    assert "THIRD-TURN-A" in text_of(third)
    assert rig.gateway.cli_pids() - before == {pid}, "the same CLI process, no respawn"
    last = rig.fake.calls_with(marker)[-1]["body"]["messages"]
    assert len(last) >= 5, "the model saw the whole conversation"
    seen = json.dumps(last)
    assert f"PLEASE-LOOKUP first {marker}" in seen and record_for("alpha") in seen


def test_restarted_gateway_resumes_the_conversation(rig):
    marker = "[anthropic-restart]"
    first = {"role": "user", "content": f"My codename is ORCHID-A7. {marker}"}
    with make_client(rig) as client:
        kind, message = create(client, [first])
        assert kind == "new"
    old = rig.restart()  # asserts that none of the old CLI processes outlived it
    assert old
    before = rig.gateway.cli_pids()
    assert not before
    messages = [
        first,
        {"role": "assistant", "content": message.content},
        {"role": "user", "content": "What is my codename?"},
    ]
    with make_client(rig) as client:
        kind, answer = create(client, messages)
        assert kind == "resumed"
        assert "What is my codename?" in text_of(answer)
        seen = rig.fake.calls_with(marker)[-1]
        # The model saw the earlier turn as the messages it was, from the stored transcript.
        assert "What is my codename?" in seen["last_user_text"]
        assert "ORCHID-A7" not in seen["last_user_text"]
        earlier = json.dumps(seen["body"]["messages"][:-1])
        assert "ORCHID-A7" in earlier and "conversation_history" not in earlier
        pid = new_pid(rig, before)
        # The resumed session is live: the next turn continues it.
        messages += [
            {"role": "assistant", "content": answer.content},
            {"role": "user", "content": "Thanks AFTER-RESUME-A"},
        ]
        kind, after = create(client, messages)
        assert kind == "continued"
        assert "AFTER-RESUME-A" in text_of(after)
        assert rig.gateway.cli_pids() == {pid}


def test_held_call_past_its_deadline(rig, client):
    marker = "[anthropic-held]"
    messages = [{"role": "user", "content": f"PLEASE-LOOKUP slowly {marker}"}]
    kind, message = create(client, messages)
    assert message.stop_reason == "tool_use"
    started = time.monotonic()
    # No result in time: the gateway answers the held call with an error, and the model sees it.
    call = wait_for(
        lambda: next(
            (c for c in rig.fake.calls_with(marker) if HELD_CALL_TIMEOUT_TEXT in json.dumps(c)),
            None,
        ),
        30,
        "the model to see the held call's timeout",
    )
    assert time.monotonic() - started >= 2, "not before the deadline (3 s)"
    (result,) = last_user_results(call)
    assert result["tool_use_id"] == tool_uses(message)[0].id
    assert HELD_CALL_TIMEOUT_TEXT in result_text(result)

    # A late result: the turn went on without the client, so a new CLI resumes the history
    # with the result, which the model reads as a tool_result block.
    messages += [
        {"role": "assistant", "content": message.content},
        {"role": "user", "content": run_tools(message)},
    ]
    kind, answer = create(client, messages)
    assert kind == "resumed"
    assert answer.stop_reason == "end_turn"
    assert record_for("alpha") in text_of(answer)
    last = rig.fake.calls_with(marker)[-1]
    (result,) = last_user_results(last)
    assert result["tool_use_id"] == tool_uses(message)[0].id
    assert record_for("alpha") in result_text(result)
    assert "conversation_history" not in json.dumps(last["body"]["messages"])


def test_client_disconnects_mid_stream(rig, client):
    marker = "[anthropic-disconnect]"
    before = rig.gateway.cli_pids()
    first = {"role": "user", "content": f"hello {marker}"}
    kind, message = create(client, [first])
    assert kind == "new"
    pid = new_pid(rig, before)
    messages = [
        first,
        {"role": "assistant", "content": message.content},
        {"role": "user", "content": "PLEASE-SLOW answer, please"},
    ]
    with client.messages.stream(
        model=ANTHROPIC_MODEL, max_tokens=1024, tools=[LOOKUP_TOOL_ANTHROPIC], messages=messages
    ) as stream:
        first_event = next(iter(stream))
        assert first_event.type == "message_start"
    # Leaving the block closed the connection. The interrupted turn settles and the
    # conversation goes on, on the same process.
    messages[2] = {"role": "user", "content": "PLEASE-AFTER the interrupt"}
    deadline = time.monotonic() + 30
    while True:
        try:
            kind, answer = create(client, messages)
            break
        except anthropic.RateLimitError as error:  # busy while the interrupt settles
            assert error.status_code == 429
            assert time.monotonic() < deadline, "still busy after 30 s"
            time.sleep(0.1)
    assert kind == "continued"
    assert "PLEASE-AFTER" in text_of(answer)
    assert "slow slow" not in text_of(answer)
    assert rig.gateway.cli_pids() - before == {pid}
    calls = rig.fake.calls_with(marker)
    slow_alone = [
        c
        for c in calls
        if "PLEASE-SLOW" in c["last_user_text"] and "PLEASE-AFTER" not in c["last_user_text"]
    ]
    assert len(slow_alone) == 1, "the slow prompt reached the model once, and was cut short"
    assert "[Request interrupted by user]" in calls[-1]["last_user_text"]


def test_wrong_key_is_an_authentication_error(rig):
    with make_client(rig, "not-the-key") as client:
        with pytest.raises(anthropic.AuthenticationError) as caught:
            client.messages.create(
                model=ANTHROPIC_MODEL,
                max_tokens=16,
                messages=[{"role": "user", "content": "hi [anthropic-auth]"}],
            )
    assert caught.value.status_code == 401
    assert caught.value.body["error"]["type"] == "authentication_error"
    assert not rig.fake.calls_with("[anthropic-auth]")
