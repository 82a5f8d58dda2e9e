// The official TypeScript SDK v1 (@modelcontextprotocol/sdk) on a legacy revision,
// over Streamable HTTP or websockets: list the tools, ask who we are, and call a
// tool that asks (the elicitation handler answers yes).
// Usage: node sdk_v1.mjs http|ws URL   (MCP_TOKEN: an Authorization header value)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { TokenWebSocketTransport } from "./token_websocket.mjs";

const [kind, url] = process.argv.slice(2);
const authorization = process.env.MCP_TOKEN; // e.g. "Token KEY" or "Bearer ACCESS_TOKEN"

const transport =
  kind === "ws"
    ? new TokenWebSocketTransport(new URL(url), authorization)
    : new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: authorization } },
      });

const client = new Client({ name: "my-client", version: "1.0.0" }, { capabilities: { elicitation: {} } });
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  return { action: "accept", content: { confirm: true } };
});
await client.connect(transport);

const tools = await client.listTools();
const who = await client.callTool({ name: "whoami", arguments: {} });
const cleared = await client.callTool({ name: "clear_cache", arguments: { region: "eu" } });
console.log(
  JSON.stringify({
    protocolVersion: transport.protocolVersion ?? null,
    server: client.getServerVersion(),
    tools: tools.tools.map((tool) => tool.name),
    whoami: who.structuredContent,
    clearCache: cleared.content[0].text,
    asked,
  }),
);
await client.close();
