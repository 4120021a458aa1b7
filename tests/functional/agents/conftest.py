from tests.functional.mcp.served import served, tool_specs

__all__ = ["served", "tool_specs"]
