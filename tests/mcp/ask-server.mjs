#!/usr/bin/env node
// A stdio MCP server for the end-to-end tests, with no dependencies: one tool, `ask`, that asks
// the user (an MCP elicitation, through the CLI) which folder to use and answers with what came
// back; and `echo`, which answers with its text.
import { createInterface } from "node:readline";

let nextId = 1;
const waiting = new Map();
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");

function handle(message) {
  if (message.id !== undefined && !message.method) {
    // An answer to our own request (the elicitation).
    waiting.get(message.id)?.(message);
    waiting.delete(message.id);
    return;
  }
  const reply = (result) => send({ jsonrpc: "2.0", id: message.id, result });
  switch (message.method) {
    case "initialize":
      return reply({
        protocolVersion: message.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "ask", version: "1.0.0" },
      });
    case "tools/list":
      return reply({
        tools: [
          {
            name: "ask",
            description: "Asks the user which folder to save in.",
            inputSchema: { type: "object", properties: {} },
          },
          {
            name: "echo",
            description: "Answers with its text.",
            inputSchema: { type: "object", properties: { text: { type: "string" } } },
          },
        ],
      });
    case "tools/call": {
      if (message.params.name === "echo") {
        return reply({ content: [{ type: "text", text: `echo: ${message.params.arguments?.text}` }] });
      }
      const id = `elicit-${nextId++}`;
      waiting.set(id, (answer) => {
        const result = answer.result ?? {};
        const text =
          result.action === "accept" ? `folder: ${result.content?.folder}` : `no folder (${result.action})`;
        reply({ content: [{ type: "text", text }] });
      });
      return send({
        jsonrpc: "2.0",
        id,
        method: "elicitation/create",
        params: {
          message: "Which folder?",
          requestedSchema: { type: "object", properties: { folder: { type: "string" } }, required: ["folder"] },
        },
      });
    }
    default:
      if (message.id !== undefined) reply({});
  }
}

createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim()) handle(JSON.parse(line));
});
