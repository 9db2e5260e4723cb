"""A real MCP client through OAuth, for tests/it/oauth.rs: the MCP Python SDK's OAuth client
flow end to end against kernel-mcp (`serve --transport http --oauth-issuer ...`).

The SDK gets a 401 from the server, reads its protected resource metadata, discovers the
authorization server (tests/oauth/provider.mjs), registers itself (dynamic client
registration), and sends the person to the authorization URL. Here the "person" is
`sign_in`: it follows the provider's redirects and fills in its login form over HTTP, as a
browser would, and hands the code back. Then the SDK exchanges it for a token (PKCE, RFC 8707
resource) and calls the server with it.

Prints one JSON object: the tools listed, the structured results of the calls, the scope the
token was granted, and the token (test-only: the test checks that the server never logs it).

Usage: mcp_client.py URL USER PASSWORD SESSION
"""

import asyncio
import json
import re
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

REDIRECT_URI = "http://127.0.0.1:1/callback"


class Memory(TokenStorage):
    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def sign_in(authorization_url: str, user: str, password: str) -> AuthorizationCodeResult:
    """What a person does in the browser: follow the redirects, sign in, allow."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as http:
        url = authorization_url
        for _ in range(10):
            if url.startswith(REDIRECT_URI):
                q = parse_qs(urlparse(url).query)
                return AuthorizationCodeResult(
                    code=q["code"][0], state=q.get("state", [None])[0], iss=q.get("iss", [None])[0]
                )
            r = await http.get(url)
            if r.status_code == 200:
                action = re.search(r'action="([^"]+)"', r.text).group(1)
                r = await http.post(urljoin(url, action), data={"login": user, "password": password})
            if r.status_code not in (302, 303):
                raise RuntimeError(f"sign-in stopped at {r.status_code}: {r.text[:200]}")
            url = urljoin(url, r.headers["location"])
    raise RuntimeError("too many redirects while signing in")


async def main(url: str, user: str, password: str, session: str) -> None:
    storage = Memory()
    pending: asyncio.Future = asyncio.get_running_loop().create_future()

    async def redirect(authorization_url: str) -> None:
        pending.set_result(await sign_in(authorization_url, user, password))

    async def callback() -> AuthorizationCodeResult:
        return await pending

    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="kernel-mcp OAuth test",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect,
        callback_handler=callback,
    )
    out = {}
    async with httpx2.AsyncClient(auth=auth, timeout=120) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            calls = [
                ("create_session", {"session_id": session}),
                ("execute", {"session_id": session, "code": "6 * 7"}),
                ("list_sessions", {}),
                ("destroy_session", {"session_id": session}),
            ]
            out["calls"] = {}
            for name, args in calls:
                r = await client.call_tool(name, args)
                out["calls"][name] = {"is_error": r.is_error, "structured": r.structured_content}
    out["scope"] = storage.tokens.scope if storage.tokens else None
    # For the test to check that the server never logs it.
    out["token"] = storage.tokens.access_token if storage.tokens else None
    out["registered"] = storage.client is not None
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
