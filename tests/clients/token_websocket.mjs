// The SDK's WebSocketClientTransport, offering the Authorization value as a second
// subprotocol (WebSocket APIs cannot send headers): "mcp.authorization." + base64url.
// mcp-django authenticates the upgrade with it and selects only "mcp".
import { WebSocketClientTransport } from "@modelcontextprotocol/sdk/client/websocket.js";

export class TokenWebSocketTransport extends WebSocketClientTransport {
  constructor(url, authorization) {
    super(url);
    this.protocols = ["mcp"];
    if (authorization) {
      this.protocols.push("mcp.authorization." + Buffer.from(authorization).toString("base64url"));
    }
  }

  start() {
    // The base class opens `new WebSocket(url, "mcp")`; open it with our protocols instead.
    const Native = globalThis.WebSocket;
    const protocols = this.protocols;
    globalThis.WebSocket = class extends Native {
      constructor(url) {
        super(url, protocols);
      }
    };
    try {
      return super.start();
    } finally {
      globalThis.WebSocket = Native;
    }
  }
}
