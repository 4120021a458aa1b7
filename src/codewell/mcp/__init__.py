"""mcp capability."""
