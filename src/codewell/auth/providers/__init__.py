"""External sign-in providers: one module per kind (OAuth code hosts, OpenID Connect, SAML, HTTP header, Gerrit)."""
