"""The MCP server: Benchviewer's tools for a coding agent, over stdio (`manage.py mcp`) and at `/mcp/`."""
