"""One line of help per site config option, as the configuration page shows it beside the editor (issue #32,
item 6); docs/configuration.md has the whole story. `schema.site_config_json_schema` puts them in the schema."""

from __future__ import annotations

OPTION_HELP: dict[str, str] = {
    "externalURL": "The instance's external address (an absolute http:// or https:// URL), used in links, OAuth "
    "metadata and callbacks. Unset: CODEWELL_EXTERNAL_URL, then the listen URL.",
    "auth.providers": "Sign-in providers: builtin, saml, github, gitlab, bitbucketcloud, bitbucketserver, gerrit, "
    "openidconnect, http-header (docs/authentication.md). Builtin sign-up is off unless allowSignup is true.",
    "auth.accessTokens": "Who may create access tokens (allow) and their expiry options (allowNoExpiration, "
    "defaultExpirationDays, expirationOptionDays).",
    "auth.idpDynamicClientRegistrationEnabled": "OAuth 2 Dynamic Client Registration for MCP clients; false revokes "
    "the tokens of dynamically registered clients.",
    "auth.minPasswordLength": "Minimum length of builtin passwords (1-256).",
    "auth.lockout": "Account lockout after repeated failed sign-ins.",
    "auth.passwordResetLinkExpiry": "Lifetime of password reset links, in seconds (at least 60).",
    "auth.public": "Anonymous access: true lets visitors who are not signed in read public repositories; false "
    "asks everyone to sign in.",
    "codeHostConnections": "Code hosts whose repositories (and, with authorization: true, permissions) codewell "
    "syncs: id, kind, url, tokenEnv or tokenFile, orgs/groups/projects, repos, exclude (docs/codehosts.md).",
    "codeIntel.autoIndexing": "Auto-indexing for precise code navigation: enabled, indexers (paths of SCIP "
    "indexers), timeoutSeconds (docs/codenav.md).",
    "codeIntel.maxUploadBytes": "The largest SCIP index accepted, in bytes.",
    "deepSearch": "Deep search: mcpWaitSeconds, maxWaitingCalls, sharing.enabled, answerSeconds, maxAttempts, "
    "creditsPerAnswer, maxQuestions (docs/agents.md).",
    "email.smtp": "The SMTP relay for outgoing mail (verification links); needs email.senderAddress.",
    "email.senderAddress": "The From address of mail codewell sends (required with email.smtp).",
    "email.verificationLinkExpiry": "Lifetime of e-mail verification links, in seconds (300-2592000).",
    "licenseKey": "A signed license key (cwl1...); takes precedence over one set with `codewell license set`.",
    "mcp.enabled": "The MCP tool server at /.api/mcp (true or false); false answers 404 there.",
    "mcp.tools.disabled": 'MCP tools removed from every endpoint\'s tool list, e.g. ["read_file"].',
    "models": "Language models of the agents: default and codeFinder, each with provider, model, baseURL, apiKeyEnv "
    "and budgets (docs/agents.md). None: the retrieval pipeline answers.",
    "repositories": "Repositories to mirror, as sources of kind local (a directory scanned for git repositories) "
    "or git (clone URLs) (docs/repositories.md).",
    "repos.defaultVisibility": 'Who reads a repository registered without saying: "private" (site admins and '
    'granted users) or "everyone" (every signed-in user).',
    "search.nls.dense": "Dense ranking of natural-language search (embeddings fused with BM25): slow to index, "
    "see docs/nls.md.",
}
