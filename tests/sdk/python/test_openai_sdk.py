"""The official `openai` Python SDK, unchanged, against `ccwire serve` (real CLI, fake model)."""

from __future__ import annotations

import json
import time

import openai
import pytest

from conftest import (
    CLIENT_TIMEOUT_S,
    API_KEY,
    HELD_CALL_TIMEOUT_TEXT,
    LOOKUP_TOOL_OPENAI,
    OPENAI_MODEL,
    record_for,
    wait_for,
)


def make_client(rig, api_key: str = API_KEY) -> openai.OpenAI:
    """The SDK as an application sets it up (its own retries included), on the gateway."""
    return openai.OpenAI(
        base_url=rig.url + "/v1", api_key=api_key, timeout=CLIENT_TIMEOUT_S
    )


@pytest.fixture
def client(rig):
    with make_client(rig) as c:
        yield c


def create(client, messages, **kwargs):
    """A non-streaming request with its raw response: (x-ccwire-session, ChatCompletion)."""
    kwargs.setdefault("tools", [LOOKUP_TOOL_OPENAI])
    raw = client.chat.completions.with_raw_response.create(
        model=OPENAI_MODEL, messages=messages, **kwargs
    )
    return raw.headers.get("x-ccwire-session"), raw.parse()


def stream(client, messages, **kwargs):
    """A streamed request: (x-ccwire-session, chunks, assembled assistant message as a dict,
    finish_reason)."""
    kwargs.setdefault("tools", [LOOKUP_TOOL_OPENAI])
    raw = client.chat.completions.with_raw_response.create(
        model=OPENAI_MODEL,
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
        **kwargs,
    )
    kind = raw.headers.get("x-ccwire-session")
    chunks = list(raw.parse())
    content, calls, finish = "", [], None
    for chunk in chunks:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for delta in choice.delta.tool_calls or []:
                if delta.index == len(calls):
                    calls.append(
                        {
                            "id": delta.id,
                            "type": "function",
                            "function": {"name": delta.function.name, "arguments": ""},
                        }
                    )
                calls[delta.index]["function"]["arguments"] += delta.function.arguments or ""
            finish = choice.finish_reason or finish
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return kind, chunks, message, finish


def run_tools(tool_calls) -> list[dict]:
    """What the client's tools answer, as `tool` messages (tool_calls: SDK objects or dicts)."""
    results = []
    for call in tool_calls:
        if not isinstance(call, dict):
            call = call.model_dump()
        assert call["function"]["name"] == "lookup", "the client sees its own tool name"
        query = json.loads(call["function"]["arguments"])["query"]
        results.append({"role": "tool", "tool_call_id": call["id"], "content": record_for(query)})
    return results


def last_user_results(call: dict) -> list[dict]:
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
    marker = "[openai-text]"
    before = rig.gateway.cli_pids()
    kind, completion = create(
        client,
        [
            {"role": "system", "content": "Be brief. SYSTEM-O1"},
            {"role": "user", "content": f"Say hello {marker}"},
        ],
        tools=openai.omit,
    )
    assert kind == "new"
    assert completion.object == "chat.completion"
    (choice,) = completion.choices
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert f"Say hello {marker}" in choice.message.content
    assert not choice.message.tool_calls
    assert completion.usage.completion_tokens > 0
    new_pid(rig, before)
    (call,) = rig.fake.calls_with(marker)
    assert "SYSTEM-O1" in json.dumps(call["body"]["system"]), "the system prompt reached the model"


def test_streamed_answer(rig, client):
    marker = "[openai-stream]"
    kind, chunks, message, finish = stream(
        client, [{"role": "user", "content": f"Stream this back {marker}"}], tools=openai.omit
    )
    assert kind == "new"
    assert finish == "stop"
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 1, f"token streaming, not one piece: {pieces}"
    assert f"Stream this back {marker}" in message["content"]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0, "a usage chunk"
    assert len(rig.fake.calls_with(marker)) == 1


def test_tool_round_trip(rig, client):
    marker = "[openai-tool]"
    before = rig.gateway.cli_pids()
    messages = [{"role": "user", "content": f"PLEASE-LOOKUP alpha {marker}"}]
    kind, completion = create(client, messages)
    assert kind == "new"
    (choice,) = completion.choices
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.type == "function"
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"query": "alpha"}
    pid = new_pid(rig, before)
    (first,) = rig.fake.calls_with(marker)
    assert "mcp__client__lookup" in [t["name"] for t in first["body"]["tools"]]

    # The SDK's own message object goes back as it came, the way OpenAI's docs show.
    messages += [choice.message, *run_tools(choice.message.tool_calls)]
    kind, answer = create(client, messages)
    assert kind == "continued"
    assert answer.choices[0].finish_reason == "stop"
    assert record_for("alpha") in answer.choices[0].message.content
    assert pid in rig.gateway.cli_pids()
    calls = rig.fake.calls_with(marker)
    assert len(calls) == 2
    (result,) = last_user_results(calls[-1])
    assert result["tool_use_id"] == call.id
    assert result_text(result).startswith(record_for("alpha"))


def test_streamed_tool_round_trip(rig, client):
    marker = "[openai-stream-tool]"
    messages = [{"role": "user", "content": f"PLEASE-LOOKUP alpha {marker}"}]
    kind, chunks, message, finish = stream(client, messages)
    assert kind == "new"
    assert finish == "tool_calls"
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == "lookup"
    assert json.loads(call["function"]["arguments"]) == {"query": "alpha"}

    messages += [message, *run_tools(message["tool_calls"])]
    kind, chunks, answer, finish = stream(client, messages)
    assert kind == "continued"
    assert finish == "stop"
    assert record_for("alpha") in answer["content"]
    (result,) = last_user_results(rig.fake.calls_with(marker)[-1])
    assert result["tool_use_id"] == call["id"]
    assert result_text(result).startswith(record_for("alpha"))


def test_two_tool_calls_in_one_message(rig, client):
    marker = "[openai-two]"
    before = rig.gateway.cli_pids()
    messages = [{"role": "user", "content": f"PLEASE-TWO lookups {marker}"}]
    kind, completion = create(client, messages)
    assert kind == "new"
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "tool_calls"
    calls = message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("lookup", {"query": "alpha"}),
        ("lookup", {"query": "beta"}),
    ], "both calls of the model's message, in order"
    assert calls[0].id != calls[1].id
    pid = new_pid(rig, before)

    messages += [message, *run_tools(calls)]
    kind, answer = create(client, messages)
    assert kind == "continued"
    content = answer.choices[0].message.content
    assert record_for("alpha") in content and record_for("beta") in content
    assert rig.gateway.cli_pids() - before == {pid}
    model_calls = rig.fake.calls_with(marker)
    assert len(model_calls) == 2, "both results went to the model in one follow-up"
    results = {r["tool_use_id"]: result_text(r) for r in last_user_results(model_calls[-1])}
    assert results.keys() == {calls[0].id, calls[1].id}
    assert results[calls[0].id].startswith(record_for("alpha"))
    assert results[calls[1].id].startswith(record_for("beta"))


def test_third_turn_continues_the_same_process(rig, client):
    marker = "[openai-third]"
    before = rig.gateway.cli_pids()
    messages = [{"role": "user", "content": f"PLEASE-LOOKUP first {marker}"}]
    kind, completion = create(client, messages)
    assert kind == "new"
    pid = new_pid(rig, before)
    message = completion.choices[0].message
    messages += [message, *run_tools(message.tool_calls)]
    kind, answer = create(client, messages)
    assert kind == "continued"
    messages += [
        answer.choices[0].message,
        {"role": "user", "content": "Now the third turn THIRD-TURN-O"},
    ]
    kind, third = create(client, messages)
    assert kind == "continued"
    assert "THIRD-TURN-O" in third.choices[0].message.content
    assert rig.gateway.cli_pids() - before == {pid}, "the same CLI process, no respawn"
    last = rig.fake.calls_with(marker)[-1]["body"]["messages"]
    assert len(last) >= 5, "the model saw the whole conversation"
    seen = json.dumps(last)
    assert f"PLEASE-LOOKUP first {marker}" in seen and record_for("alpha") in seen


def test_restarted_gateway_resumes_the_conversation(rig):
    marker = "[openai-restart]"
    first = {"role": "user", "content": f"My codename is ORCHID-O7. {marker}"}
    with make_client(rig) as client:
        kind, completion = create(client, [first])
        assert kind == "new"
    old = rig.restart()  # asserts that none of the old CLI processes outlived it
    assert old
    assert not rig.gateway.cli_pids()
    messages = [
        first,
        completion.choices[0].message,
        {"role": "user", "content": "What is my codename?"},
    ]
    with make_client(rig) as client:
        kind, answer = create(client, messages)
        assert kind == "resumed"
        assert "What is my codename?" in answer.choices[0].message.content
        seen = rig.fake.calls_with(marker)[-1]
        # The model saw the earlier turn as the messages it was, from the stored transcript.
        assert "What is my codename?" in seen["last_user_text"]
        assert "ORCHID-O7" not in seen["last_user_text"]
        earlier = json.dumps(seen["body"]["messages"][:-1])
        assert "ORCHID-O7" in earlier and "conversation_history" not in earlier
        (pid,) = rig.gateway.cli_pids()
        messages += [
            answer.choices[0].message,
            {"role": "user", "content": "Thanks AFTER-RESUME-O"},
        ]
        kind, after = create(client, messages)
        assert kind == "continued"
        assert "AFTER-RESUME-O" in after.choices[0].message.content
        assert rig.gateway.cli_pids() == {pid}


def test_held_call_past_its_deadline(rig, client):
    marker = "[openai-held]"
    messages = [{"role": "user", "content": f"PLEASE-LOOKUP slowly {marker}"}]
    kind, completion = create(client, messages)
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "tool_calls"
    started = time.monotonic()
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
    assert result["tool_use_id"] == message.tool_calls[0].id
    assert result.get("is_error") is True
    assert HELD_CALL_TIMEOUT_TEXT in result_text(result)

    # A late result: a new CLI resumes the history with it, a tool_result block for the model.
    messages += [message, *run_tools(message.tool_calls)]
    kind, answer = create(client, messages)
    assert kind == "resumed"
    assert answer.choices[0].finish_reason == "stop"
    assert record_for("alpha") in answer.choices[0].message.content
    last = rig.fake.calls_with(marker)[-1]
    (result,) = last_user_results(last)
    assert result["tool_use_id"] == message.tool_calls[0].id
    assert record_for("alpha") in result_text(result)
    assert "conversation_history" not in json.dumps(last["body"]["messages"])


def test_client_disconnects_mid_stream(rig, client):
    marker = "[openai-disconnect]"
    before = rig.gateway.cli_pids()
    first = {"role": "user", "content": f"hello {marker}"}
    kind, completion = create(client, [first])
    assert kind == "new"
    pid = new_pid(rig, before)
    messages = [
        first,
        completion.choices[0].message,
        {"role": "user", "content": "PLEASE-SLOW answer, please"},
    ]
    with client.chat.completions.create(
        model=OPENAI_MODEL, messages=messages, tools=[LOOKUP_TOOL_OPENAI], stream=True
    ) as chunks:
        first_chunk = next(iter(chunks))
        assert first_chunk.object == "chat.completion.chunk"
    # Leaving the block closed the connection.
    messages[2] = {"role": "user", "content": "PLEASE-AFTER the interrupt"}
    deadline = time.monotonic() + 30
    while True:
        try:
            kind, answer = create(client, messages)
            break
        except openai.RateLimitError as error:  # busy while the interrupt settles
            assert error.status_code == 429
            assert time.monotonic() < deadline, "still busy after 30 s"
            time.sleep(0.1)
    assert kind == "continued"
    content = answer.choices[0].message.content
    assert "PLEASE-AFTER" in content
    assert "slow slow" not in content
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
        with pytest.raises(openai.AuthenticationError) as caught:
            client.chat.completions.create(
                model=OPENAI_MODEL,
                messages=[{"role": "user", "content": "hi [openai-auth]"}],
            )
    assert caught.value.status_code == 401
    assert caught.value.code is None or isinstance(caught.value.code, str)
    assert caught.value.body["type"] == "authentication_error"
    assert not rig.fake.calls_with("[openai-auth]")
