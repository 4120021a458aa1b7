"""The HTTP kit: request helpers, error mapping, CSRF, session cookies, guards, page rendering, URLs, middleware
and the operational endpoints. It imports no capability."""
