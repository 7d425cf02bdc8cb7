"""Clients' tool loops whose next request is not one the live CLI can take as it is, each
unchanged, with the SDKs' default retries: AutoGen reflecting on its tool results without tools,
instructor asking again after a forced call whose object failed its validation. The results reach
the model as tool_result blocks in a conversation a new CLI resumes (`x-ccwire-session: resumed`,
`x-ccwire-session-reason` saying why), never retold as text, and nothing stays held.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
import warnings

import anthropic
import pytest
from pydantic import BaseModel, field_validator

from conftest import (
    ANTHROPIC_MODEL,
    API_KEY,
    CLIENT_TIMEOUT_S,
    OPENAI_MODEL,
    SCRIPT,
    record_for,
    wait_for,
)

ADA = {"name": "Ada", "age": 36}


def structured(obj: dict) -> dict:
    """The model's reply: a StructuredOutput call with `obj`."""
    return {"kind": "tool_use", "calls": [{"name": "StructuredOutput", "input": obj}]}


LOOPS_SCRIPT = {
    "rules": [
        {"when": {"kind": "probe"}, "reply": {"kind": "text", "text": "ok"}},
        # instructor asks again with the validation error as the forced call's result.
        {
            "when": {"kind": "conversation_contains", "text": "Recall the function correctly"},
            "reply": structured(ADA),
        },
        # First an object that passes the schema and fails the model's validator.
        {
            "when": {"kind": "last_user_contains", "text": "[loops-instructor]"},
            "reply": structured({"name": "Ada", "age": -36}),
        },
        *(rule for rule in SCRIPT["rules"] if rule["when"]["kind"] != "probe"),
    ]
}


@pytest.fixture(scope="module", autouse=True)
def loops_script(rig):
    rig.fake.set_script(LOOPS_SCRIPT)
    yield
    rig.fake.set_script(SCRIPT)


def held_tool_calls(rig) -> int:
    """The client tool calls the gateway holds (`GET /health`)."""
    request = urllib.request.Request(rig.url + "/health", headers={"x-api-key": API_KEY})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["held_tool_calls"]


def assert_results_as_blocks(call: dict, ids: list[str], texts: list[str]) -> None:
    """The model call saw the calls `ids` as tool_use blocks, each followed by its result."""
    messages = call["body"]["messages"]
    dumped = json.dumps(messages)
    assert "conversation_history" not in dumped, dumped
    uses = [
        b["id"]
        for m in messages
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]
    results = [
        b
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert uses == ids, dumped
    assert [r["tool_use_id"] for r in results] == ids, dumped
    for result, text in zip(results, texts):
        assert text in json.dumps(result["content"]), dumped


def test_autogen_reflects_on_its_tool_results_without_tools(rig):
    from autogen_agentchat.agents import AssistantAgent
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    marker = "[loops-autogen]"

    async def lookup(query: str) -> str:
        """Looks a record up."""
        return record_for(query)

    async def run():
        client = OpenAIChatCompletionClient(
            model=OPENAI_MODEL, base_url=rig.url + "/v1", api_key=API_KEY
        )
        try:
            agent = AssistantAgent(
                "assistant", model_client=client, tools=[lookup], reflect_on_tool_use=True
            )
            return await agent.run(task=f"PLEASE-TWO records {marker}")
        finally:
            await client.close()

    before = rig.gateway.cli_pids()
    with warnings.catch_warnings():
        # AutoGen warns that the answer names another model than it asked for.
        warnings.simplefilter("ignore")
        result = asyncio.run(run())
    calls = [m for m in result.messages if type(m).__name__ == "ToolCallRequestEvent"]
    assert len(calls) == 1 and len(calls[0].content) == 2, result.messages
    ids = [c.id for c in calls[0].content]
    # The reflection: the model read both results as blocks, in a CLI without the tools.
    reflection = rig.fake.calls_with(marker)[-1]
    assert_results_as_blocks(reflection, ids, [record_for("alpha"), record_for("beta")])
    assert not [t for t in reflection["body"].get("tools", []) if "lookup" in t["name"]]
    answer = result.messages[-1].content
    assert record_for("alpha") in answer and record_for("beta") in answer, answer
    # The CLI that held the calls was closed: one CLI for the conversation, nothing held.
    wait_for(lambda: len(rig.gateway.cli_pids() - before) == 1, 10, "the holder to exit")
    assert held_tool_calls(rig) == 0


class Person(BaseModel):
    name: str
    age: int

    @field_validator("age")
    @classmethod
    def not_negative(cls, age: int) -> int:
        if age < 0:
            raise ValueError("an age is not negative")
        return age


def test_instructor_asks_again_after_a_forced_call_with_its_validation_error(rig):
    import instructor

    marker = "[loops-instructor]"
    with anthropic.Anthropic(base_url=rig.url, api_key=API_KEY, timeout=CLIENT_TIMEOUT_S) as c:
        client = instructor.from_anthropic(c)  # ANTHROPIC_TOOLS: the model's tool forced
        person = client.messages.create(
            model=ANTHROPIC_MODEL,
            max_tokens=1024,
            messages=[{"role": "user", "content": f"Who wrote the first program? {marker}"}],
            response_model=Person,
            max_retries=2,
        )
    assert person.model_dump() == ADA
    first, again = rig.fake.calls_with(marker)
    # The second request carries the forced call and the validation error as its result.
    (call,) = [b for m in again["body"]["messages"] if m["role"] == "assistant" for b in m["content"]
               if isinstance(b, dict) and b.get("type") == "tool_use"]
    assert call["name"] == "mcp__client__Person" and call["input"]["age"] == -36
    assert_results_as_blocks(again, [call["id"]], ["an age is not negative"])
