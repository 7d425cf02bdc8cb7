"""Structured output through the gateway, the way applications ask for it: the official SDKs'
parse helpers, forced tools, and the libraries built on them (instructor, pydantic-ai, the OpenAI
Agents SDK, LangChain), each unchanged, against `ccwire serve` (real CLI, fake model).

The CLI runs in its schema mode: it offers the model a `StructuredOutput` tool whose input schema
is the one the client asked for, and the turn ends when the model calls it with a valid object. So
the scripted model answers each test's prompt with a `StructuredOutput` call; for a forced tool the
schema is that tool's input schema, and for `any`/`required` over several tools it is an envelope
`{"tool": <name>, "input": {...}}` that names the client tool to call.
"""

from __future__ import annotations

import asyncio
import json

import anthropic
import openai
import pytest
from pydantic import BaseModel

from conftest import (
    ANTHROPIC_MODEL,
    API_KEY,
    CLIENT_TIMEOUT_S,
    OPENAI_MODEL,
    SCRIPT,
    record_for,
)


class Person(BaseModel):
    name: str
    age: int


class Team(BaseModel):
    """Nested: the JSON schema has `$defs` and a `$ref`."""

    name: str
    members: list[Person]


class Pet(BaseModel):
    species: str
    name: str


ADA = {"name": "Ada", "age": 36}
TEAM = {
    "name": "Analytical Engine",
    "members": [{"name": "Ada", "age": 36}, {"name": "Charles", "age": 79}],
}
TOM = {"species": "cat", "name": "Tom"}


def structured(obj: dict) -> dict:
    """The model's reply: a StructuredOutput call with `obj`."""
    return {"kind": "tool_use", "calls": [{"name": "StructuredOutput", "input": obj}]}


def envelope(tool: str, obj: dict) -> dict:
    """The model's reply under `any`/`required` with several tools: which one, and its input."""
    return structured({"tool": tool, "input": obj})


# Prompt markers (each test's conversation is its own) and what the model answers to them.
ANSWERS = {
    "[so-chat-parse]": structured(ADA),
    "[so-chat-nested]": structured(TEAM),
    "[so-chat-stream]": structured(ADA),
    "[so-chat-json-object]": structured(ADA),
    "[so-chat-forced]": structured(ADA),
    "[so-responses-parse]": structured(ADA),
    "[so-responses-stream]": structured(ADA),
    "[so-responses-forced]": structured(ADA),
    "[so-anthropic-forced]": structured(ADA),
    "[so-anthropic-any]": envelope("get_weather", {"city": "Paris"}),
    "[so-anthropic-parse]": structured(ADA),
    "[so-anthropic-nested]": structured(TEAM),
    "[so-anthropic-beta]": structured(ADA),
    "[so-anthropic-output-format]": structured(ADA),
    "[so-anthropic-stream]": structured(ADA),
    "[so-instructor-openai]": structured(TEAM),
    "[so-instructor-anthropic]": structured(ADA),
    "[so-pai-openai]": structured(ADA),
    "[so-pai-anthropic]": structured(ADA),
    "[so-pai-two-outputs]": envelope("final_result_Pet", TOM),
    "[so-pai-tool]": envelope("lookup", {"query": "so-pai"}),
    "[so-agents-responses]": structured(ADA),
    "[so-agents-chat]": structured(ADA),
    "[so-agents-tool]": {
        "kind": "tool_use",
        "calls": [{"name": "mcp__client__lookup", "input": {"query": "so-agents"}}],
    },
    "[so-langchain-openai]": structured(ADA),
    "[so-langchain-anthropic]": structured(ADA),
}

STRUCTURED_SCRIPT = {
    "rules": [
        {"when": {"kind": "probe"}, "reply": {"kind": "text", "text": "ok"}},
        # A model that never produces a valid object (`age` is missing): every attempt of the
        # conversation, retries included, gets the same answer.
        {
            "when": {"kind": "conversation_contains", "text": "[so-invalid"},
            "reply": structured({"name": "Ada"}),
        },
        # The second step of the tool-then-output tests: the client's tool result is in.
        {
            "when": {"kind": "last_user_contains", "text": record_for("so-pai")},
            "reply": envelope("final_result", ADA),
        },
        {
            "when": {"kind": "last_user_contains", "text": record_for("so-agents")},
            "reply": structured(ADA),
        },
        *(
            {"when": {"kind": "last_user_contains", "text": marker}, "reply": reply}
            for marker, reply in ANSWERS.items()
        ),
        *(rule for rule in SCRIPT["rules"] if rule["when"]["kind"] != "probe"),
    ]
}


@pytest.fixture(scope="module", autouse=True)
def structured_script(rig):
    rig.fake.set_script(STRUCTURED_SCRIPT)
    yield
    rig.fake.set_script(SCRIPT)


def openai_client(rig) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=rig.url + "/v1", api_key=API_KEY, timeout=CLIENT_TIMEOUT_S
    )


def async_openai_client(rig) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=rig.url + "/v1", api_key=API_KEY, timeout=CLIENT_TIMEOUT_S
    )


def anthropic_client(rig) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=rig.url, api_key=API_KEY, timeout=CLIENT_TIMEOUT_S
    )


def async_anthropic_client(rig) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=rig.url, api_key=API_KEY, timeout=CLIENT_TIMEOUT_S
    )


@pytest.fixture
def oai(rig):
    with openai_client(rig) as c:
        yield c


@pytest.fixture
def claude(rig):
    with anthropic_client(rig) as c:
        yield c


def lookup(query: str) -> str:
    """Looks a record up."""
    return record_for(query)


LOOKUP_PARAMS = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
}
WEATHER_PARAMS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def schema_seen(rig, marker: str) -> dict:
    """The input schema of the StructuredOutput tool the model was offered for the conversation."""
    calls = rig.fake.calls_with(marker)
    assert calls, f"the model was never called for {marker}"
    tools = calls[0]["body"].get("tools", [])
    found = [t for t in tools if t.get("name") == "StructuredOutput"]
    assert len(found) == 1, f"one StructuredOutput tool, got {[t.get('name') for t in tools]}"
    return found[0]["input_schema"]


def assert_person_schema(rig, marker: str) -> None:
    schema = schema_seen(rig, marker)
    assert set(schema["properties"]) == {"name", "age"}, schema
    assert set(schema.get("required", [])) == {"name", "age"}, schema


def assert_envelope_schema(rig, marker: str, tools: set[str]) -> None:
    schema = schema_seen(rig, marker)
    assert set(schema["properties"]) == {"tool", "input"}, schema
    assert set(schema["properties"]["tool"]["enum"]) == tools, schema


# ---------------------------------------------------------------------------------------------
# The openai SDK: Chat Completions


def test_openai_chat_parse(rig, oai):
    marker = "[so-chat-parse]"
    completion = oai.chat.completions.parse(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": f"Who wrote the first program? {marker}"}],
        response_format=Person,
    )
    (choice,) = completion.choices
    assert choice.finish_reason == "stop"
    assert choice.message.refusal is None
    assert not choice.message.tool_calls
    assert choice.message.parsed == Person(**ADA)
    assert json.loads(choice.message.content) == ADA
    assert_person_schema(rig, marker)
    assert len(rig.fake.calls_with(marker)) == 1


def test_openai_chat_parse_nested_model(rig, oai):
    marker = "[so-chat-nested]"
    completion = oai.chat.completions.parse(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": f"Describe the team {marker}"}],
        response_format=Team,
    )
    assert completion.choices[0].message.parsed == Team(**TEAM)
    schema = schema_seen(rig, marker)
    assert set(schema["properties"]) == {"name", "members"}
    assert "age" in json.dumps(schema), "the member schema ($defs/$ref) reached the model"


def test_openai_chat_stream_parse(rig, oai):
    marker = "[so-chat-stream]"
    with oai.chat.completions.stream(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": f"Stream a person {marker}"}],
        response_format=Person,
    ) as stream:
        events = list(stream)
        completion = stream.get_final_completion()
    deltas = [e.delta for e in events if e.type == "content.delta"]
    assert len(deltas) > 1, "the JSON streamed as the model wrote it, in pieces"
    (done,) = [e for e in events if e.type == "content.done"]
    assert done.parsed == Person(**ADA)
    assert json.loads("".join(deltas)) == ADA
    assert completion.choices[0].message.parsed == Person(**ADA)
    assert completion.choices[0].finish_reason == "stop"


def test_openai_chat_json_object(rig, oai):
    marker = "[so-chat-json-object]"
    completion = oai.chat.completions.create(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": f"A person as JSON, please {marker}"}],
        response_format={"type": "json_object"},
    )
    assert completion.choices[0].finish_reason == "stop"
    assert json.loads(completion.choices[0].message.content) == ADA


def test_openai_chat_forced_function_tool(rig, oai):
    marker = "[so-chat-forced]"
    completion = oai.chat.completions.parse(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": f"Record the person {marker}"}],
        tools=[
            openai.pydantic_function_tool(Person, name="record_person"),
            # parse() accepts only strict function tools.
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "parameters": {**LOOKUP_PARAMS, "additionalProperties": False},
                    "strict": True,
                },
            },
        ],
        tool_choice={"type": "function", "function": {"name": "record_person"}},
    )
    (call,) = completion.choices[0].message.tool_calls
    assert call.type == "function"
    assert call.function.name == "record_person"
    assert json.loads(call.function.arguments) == ADA
    assert call.function.parsed_arguments == Person(**ADA)
    assert call.id
    assert_person_schema(rig, marker)


# ---------------------------------------------------------------------------------------------
# The openai SDK: Responses


def test_openai_responses_parse(rig, oai):
    marker = "[so-responses-parse]"
    response = oai.responses.parse(
        model=OPENAI_MODEL, input=f"Who wrote the first program? {marker}", text_format=Person
    )
    assert response.status == "completed"
    assert response.output_parsed == Person(**ADA)
    assert json.loads(response.output_text) == ADA
    assert not [item for item in response.output if item.type == "function_call"]
    assert_person_schema(rig, marker)


def test_openai_responses_stream_parse(rig, oai):
    marker = "[so-responses-stream]"
    with oai.responses.stream(
        model=OPENAI_MODEL, input=f"Stream a person {marker}", text_format=Person
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        response = stream.get_final_response()
    assert deltas
    assert json.loads("".join(deltas)) == ADA
    assert response.output_parsed == Person(**ADA)


def test_openai_responses_forced_function(rig, oai):
    marker = "[so-responses-forced]"
    response = oai.responses.create(
        model=OPENAI_MODEL,
        input=f"Record the person {marker}",
        tools=[
            {
                "type": "function",
                "name": "record_person",
                "parameters": Person.model_json_schema(),
                "strict": False,
            },
            {"type": "function", "name": "lookup", "parameters": LOOKUP_PARAMS, "strict": False},
        ],
        tool_choice={"type": "function", "name": "record_person"},
    )
    (call,) = [item for item in response.output if item.type == "function_call"]
    assert call.name == "record_person"
    assert json.loads(call.arguments) == ADA
    assert call.call_id
    assert_person_schema(rig, marker)


# ---------------------------------------------------------------------------------------------
# The anthropic SDK


def test_anthropic_forced_tool(rig, claude):
    marker = "[so-anthropic-forced]"
    message = claude.messages.create(
        model=ANTHROPIC_MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": f"Record the person {marker}"}],
        tools=[
            {"name": "record_person", "input_schema": Person.model_json_schema()},
            {"name": "lookup", "input_schema": LOOKUP_PARAMS},
        ],
        tool_choice={"type": "tool", "name": "record_person"},
    )
    assert message.stop_reason == "tool_use"
    (call,) = [b for b in message.content if b.type == "tool_use"]
    assert call.name == "record_person"
    assert call.input == ADA
    assert Person.model_validate(call.input) == Person(**ADA)
    assert_person_schema(rig, marker)


def test_anthropic_any_of_two_tools(rig, claude):
    marker = "[so-anthropic-any]"
    message = claude.messages.create(
        model=ANTHROPIC_MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": f"What is the weather in Paris? {marker}"}],
        tools=[
            {"name": "lookup", "input_schema": LOOKUP_PARAMS},
            {"name": "get_weather", "input_schema": WEATHER_PARAMS},
        ],
        tool_choice={"type": "any"},
    )
    assert message.stop_reason == "tool_use"
    (call,) = [b for b in message.content if b.type == "tool_use"]
    assert call.name == "get_weather", "the tool the model named, as the client calls it"
    assert call.input == {"city": "Paris"}
    assert_envelope_schema(rig, marker, {"lookup", "get_weather"})


def test_anthropic_messages_parse(rig, claude):
    marker = "[so-anthropic-parse]"
    message = claude.messages.parse(
        model=ANTHROPIC_MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": f"Who wrote the first program? {marker}"}],
        output_format=Person,
    )
    assert message.stop_reason == "end_turn"
    assert message.parsed_output == Person(**ADA)
    (block,) = message.content
    assert block.type == "text"
    assert json.loads(block.text) == ADA
    assert_person_schema(rig, marker)


def test_anthropic_messages_parse_nested_model(rig, claude):
    marker = "[so-anthropic-nested]"
    message = claude.messages.parse(
        model=ANTHROPIC_MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": f"Describe the team {marker}"}],
        output_format=Team,
    )
    assert message.parsed_output == Team(**TEAM)
    schema = schema_seen(rig, marker)
    assert set(schema["properties"]) == {"name", "members"}
    assert "age" in json.dumps(schema), "the member schema ($defs/$ref) reached the model"


def test_anthropic_beta_messages_parse(rig, claude):
    marker = "[so-anthropic-beta]"
    message = claude.beta.messages.parse(
        model=ANTHROPIC_MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": f"Who wrote the first program? {marker}"}],
        output_format=Person,
    )
    assert message.parsed_output == Person(**ADA)


def test_anthropic_top_level_output_format(rig, claude):
    """The structured-outputs beta's first shape (older SDKs): a top-level `output_format`."""
    marker = "[so-anthropic-output-format]"
    message = claude.beta.messages.create(
        model=ANTHROPIC_MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": f"Who wrote the first program? {marker}"}],
        betas=["structured-outputs-2025-11-13"],
        extra_body={
            "output_format": {"type": "json_schema", "schema": Person.model_json_schema()}
        },
    )
    (block,) = message.content
    assert block.type == "text"
    assert json.loads(block.text) == ADA
    assert_person_schema(rig, marker)


def test_anthropic_stream_parse(rig, claude):
    marker = "[so-anthropic-stream]"
    with claude.messages.stream(
        model=ANTHROPIC_MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": f"Stream a person {marker}"}],
        output_format=Person,
    ) as stream:
        pieces = list(stream.text_stream)
        message = stream.get_final_message()
    assert len(pieces) > 1, "the JSON streamed as the model wrote it, in pieces"
    assert json.loads("".join(pieces)) == ADA
    assert message.parsed_output == Person(**ADA)
    assert message.stop_reason == "end_turn"


# ---------------------------------------------------------------------------------------------
# A model that never produces a valid object


def test_openai_no_valid_object_is_a_422_the_sdk_does_not_retry(rig, oai):
    marker = "[so-invalid-openai]"
    with pytest.raises(openai.APIStatusError) as caught:
        oai.chat.completions.parse(
            model=OPENAI_MODEL,
            messages=[{"role": "user", "content": f"Who wrote the first program? {marker}"}],
            response_format=Person,
        )
    assert caught.value.status_code == 422, caught.value
    # The CLI gave the model its 5 attempts ("after 5 attempts"), then ended the turn; the
    # SDK, with its default retries, did not try again.
    assert len(rig.fake.calls_with(marker)) == 5


def test_anthropic_no_valid_object_is_a_422_the_sdk_does_not_retry(rig, claude):
    marker = "[so-invalid-anthropic]"
    with pytest.raises(anthropic.APIStatusError) as caught:
        claude.messages.parse(
            model=ANTHROPIC_MODEL,
            max_tokens=1024,
            messages=[{"role": "user", "content": f"Who wrote the first program? {marker}"}],
            output_format=Person,
        )
    assert caught.value.status_code == 422, caught.value
    assert len(rig.fake.calls_with(marker)) == 5


# ---------------------------------------------------------------------------------------------
# instructor


def test_instructor_from_openai(rig, oai):
    import instructor

    marker = "[so-instructor-openai]"
    client = instructor.from_openai(oai)  # mode TOOLS: a forced function named after the model
    team = client.chat.completions.create(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": f"Describe the team {marker}"}],
        response_model=Team,
    )
    # instructor answers with an instance of its own subclass of the response model.
    assert isinstance(team, Team) and team.model_dump() == TEAM
    schema = schema_seen(rig, marker)
    assert set(schema["properties"]) == {"name", "members"}
    assert len(rig.fake.calls_with(marker)) == 1, "no re-ask"


def test_instructor_from_anthropic(rig, claude):
    import instructor

    marker = "[so-instructor-anthropic]"
    client = instructor.from_anthropic(claude)  # ANTHROPIC_TOOLS: a forced tool
    person = client.messages.create(
        model=ANTHROPIC_MODEL,
        max_tokens=1024,
        messages=[{"role": "user", "content": f"Who wrote the first program? {marker}"}],
        response_model=Person,
    )
    assert isinstance(person, Person) and person.model_dump() == ADA
    assert_person_schema(rig, marker)
    assert len(rig.fake.calls_with(marker)) == 1, "no re-ask"


# ---------------------------------------------------------------------------------------------
# pydantic-ai


def pai_openai_run(rig, prompt: str, **agent_kwargs):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    async def run():
        async with async_openai_client(rig) as client:
            model = OpenAIChatModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))
            return (await Agent(model, **agent_kwargs).run(prompt)).output

    return asyncio.run(run())


def test_pydantic_ai_openai_chat(rig):
    marker = "[so-pai-openai]"
    # An output tool `final_result`, tool_choice "required".
    output = pai_openai_run(rig, f"Who wrote the first program? {marker}", output_type=Person)
    assert output == Person(**ADA)
    assert_person_schema(rig, marker)


def test_pydantic_ai_anthropic(rig):
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    marker = "[so-pai-anthropic]"

    async def run():
        async with async_anthropic_client(rig) as client:
            model = AnthropicModel(
                ANTHROPIC_MODEL, provider=AnthropicProvider(anthropic_client=client)
            )
            agent = Agent(model, output_type=Person)
            return (await agent.run(f"Who wrote the first program? {marker}")).output

    # A streamed request, one output tool `final_result`, tool_choice {"type": "any"}.
    assert asyncio.run(run()) == Person(**ADA)
    assert_person_schema(rig, marker)


def test_pydantic_ai_two_output_types(rig):
    marker = "[so-pai-two-outputs]"
    # Two output tools, final_result_Person and final_result_Pet, tool_choice "required".
    output = pai_openai_run(rig, f"Who is this? {marker}", output_type=[Person, Pet])
    assert output == Pet(**TOM)
    assert_envelope_schema(rig, marker, {"final_result_Person", "final_result_Pet"})


def test_pydantic_ai_tool_then_output(rig):
    marker = "[so-pai-tool]"
    # Both requests: tools [lookup, final_result] with tool_choice "required". The model calls
    # lookup first, then, with its result, final_result.
    output = pai_openai_run(
        rig, f"Look it up, then answer {marker}", output_type=Person, tools=[lookup]
    )
    assert output == Person(**ADA)
    calls = rig.fake.calls_with(marker)
    assert len(calls) == 2
    assert record_for("so-pai") in calls[-1]["last_user_text"], "the model got the tool's result"
    # The forced call's CLI ended with it: a new one resumes the history, the call and its
    # result as blocks.
    messages = calls[-1]["body"]["messages"]
    assert "conversation_history" not in json.dumps(messages)
    (use,) = [b for m in messages if m["role"] == "assistant" and isinstance(m["content"], list)
              for b in m["content"] if b.get("type") == "tool_use"]
    assert (use["name"], use["input"]) == ("mcp__client__lookup", {"query": "so-pai"})
    results = [b for m in messages if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == [use["id"]]
    assert_envelope_schema(rig, marker, {"lookup", "final_result"})


# ---------------------------------------------------------------------------------------------
# The OpenAI Agents SDK


def agents_run(rig, prompt: str, model_class: str, **agent_kwargs):
    import agents

    async def run():
        async with async_openai_client(rig) as client:
            model = getattr(agents, model_class)(model=OPENAI_MODEL, openai_client=client)
            agent = agents.Agent(
                name="extractor", instructions="Be brief.", model=model, **agent_kwargs
            )
            result = await agents.Runner.run(
                agent, prompt, run_config=agents.RunConfig(tracing_disabled=True)
            )
            return result.final_output

    return asyncio.run(run())


def test_openai_agents_responses(rig):
    marker = "[so-agents-responses]"
    # The Responses API: text.format json_schema "final_output", strict.
    output = agents_run(
        rig, f"Who wrote the first program? {marker}", "OpenAIResponsesModel", output_type=Person
    )
    assert output == Person(**ADA)
    assert_person_schema(rig, marker)


def test_openai_agents_chat_completions(rig):
    marker = "[so-agents-chat]"
    # Chat Completions: response_format json_schema "final_output", strict.
    output = agents_run(
        rig,
        f"Who wrote the first program? {marker}",
        "OpenAIChatCompletionsModel",
        output_type=Person,
    )
    assert output == Person(**ADA)
    assert_person_schema(rig, marker)


def test_openai_agents_tool_then_output(rig):
    import agents

    marker = "[so-agents-tool]"
    # Responses with a function tool and text.format (tool_choice left to the model): the model
    # calls the client's tool, then gives the object with its result.
    output = agents_run(
        rig,
        f"Look it up, then answer {marker}",
        "OpenAIResponsesModel",
        output_type=Person,
        tools=[agents.function_tool(lookup)],
    )
    assert output == Person(**ADA)
    calls = rig.fake.calls_with(marker)
    assert len(calls) == 2
    assert "mcp__client__lookup" in [t["name"] for t in calls[0]["body"]["tools"]]
    assert record_for("so-agents") in calls[-1]["last_user_text"]
    assert_person_schema(rig, marker)


# ---------------------------------------------------------------------------------------------
# LangChain


def test_langchain_openai(rig):
    from langchain_openai import ChatOpenAI

    marker = "[so-langchain-openai]"
    llm = ChatOpenAI(
        model=OPENAI_MODEL,
        base_url=rig.url + "/v1",
        api_key=API_KEY,
        timeout=CLIENT_TIMEOUT_S,
    )
    # The default method, json_schema: chat.completions.parse with a strict response_format.
    person = llm.with_structured_output(Person).invoke(f"Who wrote the first program? {marker}")
    assert person == Person(**ADA)
    assert_person_schema(rig, marker)


def test_langchain_anthropic(rig):
    from langchain_anthropic import ChatAnthropic

    marker = "[so-langchain-anthropic]"
    llm = ChatAnthropic(
        model=ANTHROPIC_MODEL,
        base_url=rig.url,
        api_key=API_KEY,
        timeout=CLIENT_TIMEOUT_S,
    )
    # The default method, function_calling: a tool named "Person", forced.
    person = llm.with_structured_output(Person).invoke(f"Who wrote the first program? {marker}")
    assert person == Person(**ADA)
    assert_person_schema(rig, marker)
