// The official TypeScript SDK v2 (@modelcontextprotocol/client) with a DPoP-bound token (RFC 9449).
// Its DpopSession holds the key and signs the proofs; the token comes from the demo's token
// endpoint (client credentials) with a proof built by the same session, so it is bound to that
// key (token_type DPoP); the transport then sends every request as `Authorization: DPoP` with a
// fresh proof (the SDK's withDpopFromProvider), and answers a use_dpop_nonce challenge itself.
// Usage: node dpop_v2.mjs URL MODE   (MODE: "legacy" or "2026-07-28"; CLIENT_ID, CLIENT_SECRET,
// TOKEN_URL in the environment)
import { Client, DpopSession, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, mode] = process.argv.slice(2);
const session = await DpopSession.create({ alg: "ES256" });
const tokenUrl = new URL(process.env.TOKEN_URL);
// A token request asked for the server's nonce (RFC 9449 section 8) is sent again with it.
const requestToken = async () =>
  fetch(tokenUrl, {
    method: "POST",
    headers: {
      authorization: `Basic ${btoa(`${process.env.CLIENT_ID}:${process.env.CLIENT_SECRET}`)}`,
      "content-type": "application/x-www-form-urlencoded",
      dpop: await session.buildProof({ htm: "POST", htu: tokenUrl }),
    },
    body: new URLSearchParams({ grant_type: "client_credentials", scope: "mcp", resource: url }),
  });
let issued = await requestToken();
if (issued.status === 400 && issued.headers.has("dpop-nonce")) {
  session.observeNonce(issued, tokenUrl);
  issued = await requestToken();
}
const tokens = await issued.json();
if (!issued.ok) throw new Error(`token endpoint: ${issued.status} ${JSON.stringify(tokens)}`);

let requests = 0;
const counting = (input, init) => {
  if (new Headers(init?.headers).get("dpop")) requests += 1;
  return fetch(input, init);
};
// An OAuthClientProvider whose token is already issued: the transport composes the SDK's
// withDpopFromProvider from its dpop() and tokens(). A 401 would send it back to authorize,
// which this client never needs (the methods below say so if it were asked).
const never = (what) => async () => {
  throw new Error(`the DPoP client was asked to ${what}`);
};
const authProvider = {
  tokens: async () => tokens,
  dpop: async () => session,
  clientInformation: async () => ({ client_id: process.env.CLIENT_ID, client_secret: process.env.CLIENT_SECRET }),
  get redirectUrl() {
    return undefined;
  },
  get clientMetadata() {
    return { redirect_uris: [], grant_types: ["client_credentials"] };
  },
  saveTokens: never("save new tokens"),
  redirectToAuthorization: never("send a user to authorize"),
  saveCodeVerifier: never("save a code verifier"),
  codeVerifier: never("read a code verifier"),
};
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider, fetch: counting });
const client = new Client(
  { name: "dpop-client", version: "1.0.0" },
  {
    capabilities: { elicitation: {} },
    versionNegotiation: { mode: mode === "legacy" ? "legacy" : { pin: mode } },
  },
);
const asked = [];
client.setRequestHandler("elicitation/create", async (request) => {
  asked.push(request.params.message);
  return { action: "accept", content: { confirm: true } };
});
await client.connect(transport);
const who = await client.callTool({ name: "whoami", arguments: {} });
const cleared = await client.callTool({ name: "clear_cache", arguments: { region: "eu" } });
console.log(
  JSON.stringify({
    tokenType: tokens.token_type,
    thumbprint: session.thumbprint,
    era: client.getProtocolEra(),
    whoami: who.structuredContent,
    clearCache: cleared.content[0].text,
    asked,
    proofs: requests,
  }),
);
await client.close();
