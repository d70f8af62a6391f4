"""`/mcp/`: the MCP server over streamable HTTP, with the API's token (`Authorization: Token <key>`).

The site is a WSGI app, so the SDK's ASGI app is not mounted: this Django view authenticates the
request as the REST API does (DRF's TokenAuthentication: 401 without a token), then hands it to the
SDK's own streamable-HTTP transport, stateless and answering JSON (each POST is one JSON-RPC
exchange, no session to keep between workers), run for this one request under `async_to_sync`.
The tools' database work comes back to this request's thread (`sync_to_async(thread_sensitive=True)`).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpResponse
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from core import roles
from trials.mcp.server import CALLER, server
from trials.mcp.through_api import ORIGIN

MAX_BODY = 1_000_000  # a JSON-RPC request: arguments, never uploads


class McpEndpoint(APIView):
    """MCP's streamable HTTP transport (POST a JSON-RPC message; the answer is JSON). Every role may call;
    each tool keeps the API's rights (a viewer's agent reads, and files nothing)."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]  # (a session: a browser's MCP inspector)
    permission_classes = [IsAuthenticated]
    required_right = roles.READ  # the endpoint only reads; a tool that writes is refused by the API view it calls
    schema = None  # not a REST endpoint: MCP describes its own tools (tools/list)

    def post(self, request, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._transport(request)

    def get(self, request, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._transport(request)  # (the SDK answers 405: no stream in stateless mode)

    def delete(self, request, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._transport(request)

    def _transport(self, request) -> HttpResponse:
        body = request.body[: MAX_BODY + 1]
        scope = asgi_scope(request._request)
        user_token, origin_token = CALLER.set(request.user), ORIGIN.set(f"{request.scheme}://{request.get_host()}")
        try:
            status, headers, chunks = async_to_sync(run_once)(scope, body)
        finally:
            CALLER.reset(user_token)
            ORIGIN.reset(origin_token)
        response = HttpResponse(b"".join(chunks), status=status)
        for name, value in headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                response[name] = value
        return response


def asgi_scope(request) -> dict[str, Any]:
    headers = [
        (k[5:].replace("_", "-").lower().encode(), v.encode("latin-1"))
        for k, v in request.META.items()
        if k.startswith("HTTP_")
    ]
    for meta, name in (("CONTENT_TYPE", b"content-type"), ("CONTENT_LENGTH", b"content-length")):
        if request.META.get(meta):
            headers.append((name, str(request.META[meta]).encode("latin-1")))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "server": (request.get_host(), 0),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


async def run_once(scope: dict[str, Any], body: bytes) -> tuple[int, list[tuple[str, str]], list[bytes]]:
    """One request through the SDK's transport: its status, headers and body."""
    manager = StreamableHTTPSessionManager(
        app=server._lowlevel_server,  # the MCPServer's protocol server (its own streamable_http_app uses it so)
        json_response=True,
        stateless=True,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),  # ALLOWED_HOSTS does it
        max_request_body_size=MAX_BODY,
    )
    sent = False
    status, headers, chunks = 500, [], []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return status, headers, chunks
