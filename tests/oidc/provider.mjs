// A real OpenID Provider (npm oidc-provider) on a free loopback port, configured in memory for tests.
// Usage: node provider.mjs '<json config>'  with {clients: [...], accounts: {id: claims}}.
// Prints one line `READY <issuer>` when listening. The next interaction signs in the account named by
// `POST /__test/login-as?account=<id>` (no login form: the tests drive the relying party, not this page).
import http from "node:http";
import Provider from "oidc-provider";

const config = JSON.parse(process.argv[2] || "{}");
const accounts = config.accounts || {};
let nextAccount = Object.keys(accounts)[0];

const server = http.createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: config.clients || [],
  pkce: { required: () => true },
  claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name", "preferred_username"] },
  features: { devInteractions: { enabled: false } },
  findAccount: async (ctx, id) => {
    const claims = accounts[id];
    if (!claims) return undefined;
    return { accountId: id, claims: async () => ({ sub: id, ...claims }) };
  },
  cookies: { keys: ["codewell-test-oidc-cookie-key"] },
  ttl: { Session: 600, Interaction: 600, Grant: 600, AccessToken: 600, AuthorizationCode: 60, IdToken: 600 },
});
provider.proxy = false;

provider.use(async (ctx, next) => {
  if (ctx.method === "POST" && ctx.path === "/__test/login-as") {
    nextAccount = ctx.query.account;
    ctx.body = { ok: true };
    return;
  }
  if (ctx.path.startsWith("/interaction/")) {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    let result;
    if (details.prompt.name === "login") {
      result = { login: { accountId: nextAccount } };
    } else {
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
      grant.addOIDCScope(details.params.scope);
      result = { consent: { grantId: await grant.save() } };
    }
    await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
    return;
  }
  await next();
});

server.on("request", provider.callback());
process.stdout.write(`READY ${issuer}\n`);
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => server.close(() => process.exit(0)));
