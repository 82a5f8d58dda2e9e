// The official TypeScript SDK v2 (@modelcontextprotocol/client) with the tasks extension's
// client (@modelcontextprotocol/ext-tasks) on 2026-07-28: call a tool the server runs as a
// task, answer the question the task asks (tasks/update), and poll it to its result.
// ext-tasks sends tools/call and tasks/* through the host's own request path (rawDispatch:
// the SDK's codecs do not know the task shapes); here that is a plain fetch.
// Usage: node ext_tasks.mjs URL TOOL ARGUMENTS_JSON   (MCP_TOKEN: an Authorization header value)
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

const [url, tool, args] = process.argv.slice(2);
const PROTOCOL_VERSION = "2026-07-28";
const clientInfo = { name: "ext-tasks-client", version: "1.0.0" };
const clientCapabilities = { elicitation: {} };
const authorization = process.env.MCP_TOKEN ? { Authorization: process.env.MCP_TOKEN } : {};

const client = new Client(clientInfo, {
  capabilities: clientCapabilities,
  versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
});
await client.connect(
  new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: authorization } }),
);

// One 2026-07-28 request over HTTP, its headers mirroring the body (Mcp-Method, Mcp-Name).
// ext-tasks hands over the method and params; the JSON-RPC envelope is the host's.
let nextId = 1;
async function rawDispatch(message, options = {}) {
  const request = { jsonrpc: "2.0", id: `tasks-${nextId++}`, ...message };
  const params = request.params ?? {};
  const name = request.method === "tools/call" ? params.name : params.taskId;
  const response = await fetch(url, {
    method: "POST",
    signal: options.signal,
    headers: {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": PROTOCOL_VERSION,
      "Mcp-Method": request.method,
      ...(name === undefined ? {} : { "Mcp-Name": name }),
      ...authorization,
      ...(options.context?.headers ?? {}),
    },
    body: JSON.stringify(request),
  });
  const text = await response.text();
  const body = response.headers.get("content-type")?.startsWith("text/event-stream")
    ? JSON.parse(text.split("\n").filter((line) => line.startsWith("data:")).at(-1).slice(5))
    : JSON.parse(text);
  return "error" in body ? { kind: "error", error: body.error } : { kind: "result", result: body.result };
}

const asked = [];
const seen = [];
const session = createTaskSessionFromClient(client, {
  endpointId: url,
  rawDispatch,
  v2RequestFraming: { protocolVersion: PROTOCOL_VERSION, clientInfo, clientCapabilities },
  onInputRequest: async (request, context) => {
    asked.push({ kind: request.kind, message: request.params.message, delivery: context.delivery });
    return { action: "accept", content: { confirm: true } };
  },
});
try {
  const execution = await session.callTool(tool, JSON.parse(args));
  const { outcome } = await execution.settle({
    onEvent: (event) => {
      if (event.type === "task" && seen.at(-1) !== event.task.status) seen.push(event.task.status);
    },
  });
  const result = resultFromTaskOutcome(outcome);
  console.log(JSON.stringify({ kind: execution.kind, status: outcome.status, result, asked, seen }));
} finally {
  await session.close();
  await client.close();
}
