"""The MCP server over stdio, for a local agent: `manage.py mcp --user NAME` (and, wired later,
`benchviewer mcp`). The agent acts with that user's rights; Django must be set up first."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from trials.mcp.server import CALLER, server
from trials.mcp.through_api import ORIGIN


def main(username: str, url: str = "") -> None:
    """Serve the tools on stdin/stdout as `username` until the client closes them; `url` is where the site's
    links (a share link) should point."""
    user = get_user_model().objects.get(username=username, is_active=True)
    CALLER.set(user)
    ORIGIN.set(url)
    server.run("stdio")
