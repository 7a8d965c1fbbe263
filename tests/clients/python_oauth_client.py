"""The Python MCP SDK client (`mcp` 2.3.0) running its own OAuth flow, driven by tests/auth/e2e-python.test.ts.

Usage: python python_oauth_client.py <plan-json>
plan: {"url": str, "mode": "legacy" | "auto" | "2026-07-28", "timeoutS": float, "longTask": {...}}

As an app would use it: `mcp.client.auth.OAuthClientProvider` on the httpx2 client, with a redirect
handler that keeps the authorization URL and a callback handler that plays the user's browser: it
follows the authorization server's redirects one by one (cookies kept, as a browser keeps them)
until the client's redirect URI, and hands back its code, state and iss. The SDK does the rest on
its own: discovery from the 401, dynamic registration, PKCE, the token request, and on a 403
insufficient_scope a second authorization for the wider scope. The script connects, calls
test_simple_text and then long_task, and prints one JSON document: the results, the steps seen,
every authorization URL, and every HTTP request the client made (to the MCP server and to the
authorization server) with its status and the token it carried, if any.
"""

from __future__ import annotations

import hashlib
import json
import sys
import traceback
from typing import Any
from urllib.parse import parse_qs, urljoin, urlparse

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT_URI = "http://127.0.0.1/oauth/callback"


class MemoryStorage:
    """What the SDK asks an app to keep between runs; one run is all there is here."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Browser:
    """The user's browser: follows each redirect itself, keeps cookies, stops at the redirect URI."""

    def __init__(self) -> None:
        self.pending: str | None = None
        self.authorization_urls: list[str] = []

    async def redirect(self, authorization_url: str) -> None:
        self.pending = authorization_url
        self.authorization_urls.append(authorization_url)

    async def callback(self) -> AuthorizationCodeResult:
        if self.pending is None:
            raise RuntimeError("callback before any redirect")
        url, self.pending = self.pending, None
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            for _ in range(10):
                if url.startswith(REDIRECT_URI):
                    query = parse_qs(urlparse(url).query)
                    if "error" in query:
                        raise RuntimeError(f"authorization failed: {query}")
                    first = lambda key: query[key][0] if key in query else None  # noqa: E731
                    return AuthorizationCodeResult(code=query["code"][0], state=first("state"), iss=first("iss"))
                response = await http.get(url)
                location = response.headers.get("location")
                if not (300 <= response.status_code < 400) or location is None:
                    raise RuntimeError(f"{url} answered {response.status_code}, not a redirect")
                url = urljoin(url, location)
        raise RuntimeError("too many redirects")


def _token_id(request: httpx2.Request) -> str | None:
    """A short digest of the bearer token a request carried, so the test can tell tokens apart without printing them."""
    header = request.headers.get("authorization")
    if not header or not header.lower().startswith("bearer "):
        return None
    return hashlib.sha256(header[7:].encode()).hexdigest()[:12]


def _rpc(request: httpx2.Request) -> str | None:
    if request.method != "POST":
        return None
    try:
        body = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("method"), str):
        return None
    params = body.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return f"{body['method']}/{name}" if name else body["method"]


def _content(result: types.CallToolResult) -> dict[str, Any]:
    return {
        "content": [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content],
        "isError": bool(result.is_error),
    }


async def run(plan: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"requests": [], "logSteps": [], "authorizationUrls": []}
    browser = Browser()
    out["authorizationUrls"] = browser.authorization_urls
    sent: dict[int, dict[str, Any]] = {}

    async def on_request(request: httpx2.Request) -> None:
        record = {
            "method": request.method,
            "url": str(request.url),
            "rpc": _rpc(request),
            "token": _token_id(request),
            "lastEventId": request.headers.get("last-event-id"),
            "sessionId": request.headers.get("mcp-session-id"),
            "status": None,
            "wwwAuthenticate": None,
        }
        sent[id(request)] = record
        out["requests"].append(record)

    async def on_response(response: httpx2.Response) -> None:
        record = sent.get(id(response.request))
        if record is not None:
            record["status"] = response.status_code
            record["wwwAuthenticate"] = response.headers.get("www-authenticate")

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        if isinstance(params.data, dict) and isinstance(params.data.get("step"), int):
            out["logSteps"].append(params.data["step"])

    oauth = OAuthClientProvider(
        server_url=plan["url"],
        client_metadata=OAuthClientMetadata(
            client_name="mcp-kit e2e python client",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=MemoryStorage(),
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
    )
    timeout_s = plan["timeoutS"]
    try:
        with anyio.fail_after(timeout_s):
            http = httpx2.AsyncClient(
                auth=oauth,
                timeout=httpx2.Timeout(timeout_s),
                event_hooks={"request": [on_request], "response": [on_response]},
            )
            async with http:
                client = Client(
                    streamable_http_client(plan["url"], http_client=http),
                    mode=plan["mode"],
                    logging_callback=on_log,
                    log_level="info",
                    read_timeout_seconds=timeout_s,
                )
                async with client:
                    out["protocolVersion"] = client.protocol_version
                    out["simpleText"] = _content(await client.call_tool("test_simple_text", {}))
                    out["longTask"] = _content(await client.call_tool("long_task", plan["longTask"]))
    except Exception as error:  # the test shows it with everything the client did before
        out["error"] = "".join(traceback.format_exception(error))[-3000:]
    return out


async def main() -> None:
    print(json.dumps(await run(json.loads(sys.argv[1]))))


if __name__ == "__main__":
    anyio.run(main)
