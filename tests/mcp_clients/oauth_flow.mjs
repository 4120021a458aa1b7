// Headless OAuth run with the TypeScript MCP SDK: discovery → DCR → authorize (PKCE S256) → consent →
// token → tools/list + tools/call, as a real MCP client does it. The browser step is scripted: the signed-in
// user's session cookie comes from the test (CODEWELL_SESSION_COOKIE) and the consent form is submitted.
// Usage: node oauth_flow.mjs <mcp url> <tool name> <tool arguments as JSON>; prints one JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, toolName, toolArgs] = process.argv.slice(2);
const cookie = process.env.CODEWELL_SESSION_COOKIE;
const scope = process.env.CODEWELL_OAUTH_SCOPE || "mcp";
const redirectUrl = "http://127.0.0.1:33418/callback";

class HeadlessProvider {
  constructor() { this.client = undefined; this.saved = undefined; this.verifier = undefined; this.code = undefined; this.log = []; }
  get redirectUrl() { return redirectUrl; }
  get clientMetadata() {
    return { client_name: "codewell headless test", redirect_uris: [redirectUrl], grant_types: ["authorization_code", "refresh_token"],
             response_types: ["code"], token_endpoint_auth_method: "none", scope };
  }
  clientInformation() { return this.client; }
  saveClientInformation(info) { this.client = info; this.log.push("registered"); }
  tokens() { return this.saved; }
  saveTokens(tokens) { this.saved = tokens; this.log.push("tokens"); }
  saveCodeVerifier(verifier) { this.verifier = verifier; }
  codeVerifier() { return this.verifier; }
  async redirectToAuthorization(authorizationUrl) {
    this.log.push("authorize");
    this.authorizationUrl = authorizationUrl.toString();
    const page = await fetch(authorizationUrl, { redirect: "manual", headers: { cookie } });
    if (page.status === 302) { this.denied = page.headers.get("location"); return; }
    const html = await page.text();
    const form = new URLSearchParams();
    for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
      form.append(m[1], m[2].replaceAll("&amp;", "&").replaceAll("&quot;", '"').replaceAll("&#x27;", "'").replaceAll("&lt;", "<").replaceAll("&gt;", ">"));
    }
    form.append("decision", "approve");
    const decided = await fetch(new URL("/.auth/idp/oauth/authorize", authorizationUrl), {
      method: "POST", redirect: "manual", body: form,
      headers: { cookie, "content-type": "application/x-www-form-urlencoded" },
    });
    const location = new URL(decided.headers.get("location"));
    this.iss = location.searchParams.get("iss");
    this.code = location.searchParams.get("code");
    this.error = location.searchParams.get("error");
  }
}

const provider = new HeadlessProvider();
const client = new Client({ name: "codewell-oauth-test", version: "1.0.0" });
const out = {};
try {
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider }));
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
    if (!provider.code) throw new Error(`authorization failed: ${provider.error || provider.denied}`);
    const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
    await transport.finishAuth(provider.code);
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider }));
  }
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  out.result = await client.callTool({ name: toolName, arguments: JSON.parse(toolArgs || "{}") });
  out.ok = true;
} catch (error) {
  out.ok = false;
  out.error = String(error && error.message || error);
}
out.steps = provider.log;
out.iss = provider.iss;
out.authorizationUrl = provider.authorizationUrl;
out.clientId = provider.client && provider.client.client_id;
out.tokenType = provider.saved && provider.saved.token_type;
console.log(JSON.stringify(out));
await client.close().catch(() => {});
