// The official TypeScript SDK v2 (@modelcontextprotocol/client) on 2026-07-28 over
// Streamable HTTP: list the tools, ask who we are, and call a tool that asks. The
// ask comes back as an input_required result; the SDK answers it through the
// elicitation handler and retries the call (its inputRequired driver).
// Usage: node sdk_v2.mjs URL   (MCP_TOKEN: an Authorization header value)
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: process.env.MCP_TOKEN } },
});
const client = new Client(
  { name: "my-client", version: "1.0.0" },
  { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
);
const asked = [];
client.setRequestHandler("elicitation/create", async (request) => {
  asked.push(request.params.message);
  return { action: "accept", content: { confirm: true } };
});
await client.connect(transport);

const tools = await client.listTools();
const who = await client.callTool({ name: "whoami", arguments: {} });
const cleared = await client.callTool({ name: "clear_cache", arguments: { region: "eu" } });
console.log(
  JSON.stringify({
    protocolVersion: client.getNegotiatedProtocolVersion(),
    era: client.getProtocolEra(),
    server: client.getServerVersion(),
    tools: tools.tools.map((tool) => tool.name),
    whoami: who.structuredContent,
    clearCache: cleared.content[0].text,
    asked,
  }),
);
await client.close();
