"""An MCP server (PyPI `mcp`) that answers only with an OAuth 2.1 access token, with the
SDK's own authorization server in the same process (metadata, dynamic client
registration, authorize, token with PKCE, refresh). Its authorize endpoint approves at
once, as a user clicking "allow" would, and redirects back with a code. Access tokens live
OAUTH_TTL seconds (default 3600), so a test can see them refreshed.

One tool, `whoami`, answers the client id the token was issued to.

Usage: PORT=… [OAUTH_TTL=…] python oauth.py   (Streamable HTTP on 127.0.0.1:PORT/mcp)
"""

import os
import secrets
import time

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthToken

PORT = int(os.environ["PORT"])
TTL = int(os.environ.get("OAUTH_TTL", "3600"))
BASE = f"http://127.0.0.1:{PORT}"


class Provider:
    """Clients, codes and tokens in memory."""

    def __init__(self):
        self.clients = {}
        self.codes = {}
        self.access = {}
        self.refresh = {}
        self.issued = 0

    async def get_client(self, client_id):
        return self.clients.get(client_id)

    async def register_client(self, client_info):
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client, params):
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code):
        return self.codes.get(authorization_code)

    def issue(self, client_id, scopes, resource):
        self.issued += 1
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + TTL,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=TTL,
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )

    async def exchange_authorization_code(self, client, authorization_code):
        self.codes.pop(authorization_code.code, None)
        return self.issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client, refresh_token):
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client, refresh_token, scopes):
        self.refresh.pop(refresh_token.token, None)
        return self.issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token):
        t = self.access.get(token)
        if t is None or (t.expires_at is not None and t.expires_at < time.time()):
            return None
        return t

    async def revoke_token(self, token):
        self.access.pop(getattr(token, "token", ""), None)
        self.refresh.pop(getattr(token, "token", ""), None)


provider = Provider()
server = MCPServer(
    "oauth-test",
    auth_server_provider=provider,
    auth=AuthSettings(
        issuer_url=BASE,
        resource_server_url=f"{BASE}/mcp",
        client_registration_options=ClientRegistrationOptions(enabled=True),
    ),
)


@server.tool(name="whoami", description="Says which OAuth client the call's token was issued to.")
def whoami() -> str:
    from mcp.server.auth.middleware.auth_context import get_access_token

    t = get_access_token()
    return f"client {t.client_id if t else 'none'}; tokens issued so far: {provider.issued}"


server.run("streamable-http", host="127.0.0.1", port=PORT)
