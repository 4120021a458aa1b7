"""The ASGI application: composition root, middleware, operational endpoints and error mapping."""
