"""The official `openai` Python SDK's Responses API (`client.responses`), unchanged, against
`ccwire serve` (real CLI, fake model)."""

from __future__ import annotations

import json

import openai
import pytest

from conftest import API_KEY, CLIENT_TIMEOUT_S, OPENAI_MODEL, record_for

LOOKUP = {
    "type": "function",
    "name": "lookup",
    "description": "Looks a record up.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
}


@pytest.fixture
def client(rig):
    with openai.OpenAI(
        base_url=rig.url + "/v1", api_key=API_KEY, timeout=CLIENT_TIMEOUT_S
    ) as c:
        yield c


def outputs_for(response) -> list[dict]:
    """The client's results for a response's function calls."""
    return [
        {
            "type": "function_call_output",
            "call_id": item.call_id,
            "output": record_for(json.loads(item.arguments)["query"]),
        }
        for item in response.output
        if item.type == "function_call"
    ]


def test_text_answer(rig, client):
    marker = "[responses-text]"
    raw = client.responses.with_raw_response.create(
        model=OPENAI_MODEL, input=f"Hello {marker}", instructions="Be brief."
    )
    assert raw.headers.get("x-ccwire-session") == "new"
    response = raw.parse()
    assert response.status == "completed"
    assert response.output_text.startswith("You said: ")
    assert marker in response.output_text
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert response.usage.output_tokens > 0
    (call,) = rig.fake.calls_with(marker)
    assert "Be brief." in json.dumps(call["body"]["system"])


def test_tool_round_trip_by_previous_response_id(rig, client):
    marker = "[responses-tool]"
    first = client.responses.create(
        model=OPENAI_MODEL, tools=[LOOKUP], input=f"PLEASE-LOOKUP alpha {marker}"
    )
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "lookup"
    assert json.loads(call.arguments) == {"query": "alpha"}
    raw = client.responses.with_raw_response.create(
        model=OPENAI_MODEL,
        tools=[LOOKUP],
        previous_response_id=first.id,
        input=outputs_for(first),
    )
    assert raw.headers.get("x-ccwire-session") == "continued"
    second = raw.parse()
    assert record_for("alpha") in second.output_text
    assert second.previous_response_id == first.id
    assert len(rig.fake.calls_with(marker)) == 2


def test_streamed_tool_round_trip_with_the_whole_input(rig, client):
    marker = "[responses-stream-tool]"
    history = [{"role": "user", "content": f"PLEASE-LOOKUP alpha {marker}"}]
    with client.responses.stream(
        model=OPENAI_MODEL, tools=[LOOKUP], input=history, store=False
    ) as stream:
        deltas = [e for e in stream if e.type == "response.function_call_arguments.delta"]
        first = stream.get_final_response()
    assert deltas, "the arguments streamed"
    # The SDK's output items go back as they came, then the results.
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history += outputs_for(first)
    with client.responses.stream(
        model=OPENAI_MODEL, tools=[LOOKUP], input=history, store=False
    ) as stream:
        second = stream.get_final_response()
    assert record_for("alpha") in second.output_text
    assert len(rig.fake.calls_with(marker)) == 2
