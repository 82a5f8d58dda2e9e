// A small MCP Apps host for tests/test_apps_browser.py, built on the official packages: the
// TypeScript client (@modelcontextprotocol/client) talks to the server on 2026-07-28 and
// declares the io.modelcontextprotocol/ui extension; ext-apps' AppBridge talks to the view in
// a sandboxed iframe over postMessage. Bundled for the browser by esbuild (the test does it).
// The page's query: server (the MCP endpoint), token (a DRF token), tool, args (JSON).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  AppBridge,
  PostMessageTransport,
  RESOURCE_MIME_TYPE,
  getToolUiResourceUri,
  isToolVisibilityAppOnly,
} from "@modelcontextprotocol/ext-apps/app-bridge";

const query = new URLSearchParams(location.search);
const log = (line) => {
  document.getElementById("log").textContent += `${line}\n`;
};

// The spec's CSP for a view, from its resource's _meta.ui.csp (nothing external when empty).
function csp(declared = {}) {
  const list = (key, fallback = "") => (declared[key] || []).join(" ") || fallback;
  const resources = list("resourceDomains");
  return [
    "default-src 'none'",
    `script-src 'self' 'unsafe-inline' ${resources}`,
    `style-src 'self' 'unsafe-inline' ${resources}`,
    `connect-src 'self' ${list("connectDomains")}`,
    `img-src 'self' data: ${resources}`,
    `font-src 'self' ${resources}`,
    `media-src 'self' data: ${resources}`,
    `frame-src ${list("frameDomains", "'none'")}`,
    "object-src 'none'",
    `base-uri ${list("baseUriDomains", "'self'")}`,
  ].join("; ");
}

// The user's answer to a server's question: the host's own dialog, answered by a click.
function ask(message) {
  const dialog = document.getElementById("confirm");
  dialog.querySelector("p").textContent = message;
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
  });
}

async function main() {
  const client = new Client(
    { name: "apps-test-host", version: "1.0.0" },
    {
      capabilities: {
        elicitation: {},
        extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [RESOURCE_MIME_TYPE] } },
      },
      versionNegotiation: { mode: { pin: "2026-07-28" } },
    },
  );
  client.setRequestHandler("elicitation/create", async (request) => {
    log(`asked: ${request.params.message}`);
    const yes = await ask(request.params.message);
    return yes ? { action: "accept", content: { confirm: true } } : { action: "decline" };
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(query.get("server")), {
      requestInit: { headers: { Authorization: `Token ${query.get("token")}` } },
    }),
  );
  const { tools } = await client.listTools();
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  // What the model would be offered: app-only tools left out, as the spec asks of a host.
  window.modelTools = tools.filter((tool) => !isToolVisibilityAppOnly(tool)).map((tool) => tool.name);
  window.listed = tools.map((tool) => ({ name: tool.name, meta: tool._meta || null }));
  const tool = byName.get(query.get("tool"));
  const uri = getToolUiResourceUri(tool);
  log(`tool ${tool.name}: view ${uri}`);
  const read = await client.readResource({ uri });
  const view = read.contents[0];
  window.viewMeta = view._meta || null;
  const args = JSON.parse(query.get("args") || "{}");
  const result = await client.callTool({ name: tool.name, arguments: args });
  log(`result: ${result.content.map((c) => c.text).join(" ")}`);

  const iframe = document.createElement("iframe");
  iframe.id = "view";
  iframe.setAttribute("sandbox", "allow-scripts");
  const policy = `<meta http-equiv="Content-Security-Policy" content="${csp(view._meta?.ui?.csp)}">`;
  if (view._meta?.ui?.prefersBorder) iframe.classList.add("bordered");

  const bridge = new AppBridge(
    null,
    { name: "apps-test-host", version: "1.0.0" },
    { serverTools: {}, logging: {} },
    { hostContext: { theme: "light", displayMode: "inline" } },
  );
  // The view's tools/call, proxied to the server: only tools this server lets an app call.
  bridge.oncalltool = async (params) => {
    const called = byName.get(params.name);
    const visibility = called?._meta?.ui?.visibility || ["model", "app"];
    if (!visibility.includes("app")) throw new Error(`${params.name} is not callable by a view`);
    log(`view calls ${params.name}`);
    const answer = await client.callTool(params);
    log(`view's call answered: ${answer.content.map((c) => c.text).join(" ")}`);
    return answer;
  };
  bridge.onsizechange = ({ height }) => {
    if (height) iframe.style.height = `${height}px`;
  };
  bridge.oninitialized = async () => {
    await bridge.sendToolInput({ arguments: args });
    await bridge.sendToolResult(result);
    document.body.dataset.state = "shown";
  };
  // Listening before the view's document exists: its script sends ui/initialize as it runs,
  // and a message that arrives before the bridge listens is lost (the view then waits for ever).
  document.getElementById("stage").append(iframe);
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.srcdoc = view.text.replace(/<head>/i, `<head>${policy}`);
}

main().catch((error) => {
  log(`error: ${error.stack || error}`);
  document.body.dataset.state = "failed";
});
