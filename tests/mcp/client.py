"""The PyPI `mcp` client (the Python SDK's `Client`) against an MCP server over Streamable
HTTP with a bearer token: lists the tools and calls the ones named, printing one JSON
object (the protocol version, the tool names, each call's result).

Usage: python client.py URL TOKEN MODE [TOOL JSON-ARGS]...
MODE is `legacy` (2025-11-25, initialize) or a protocol version (`2026-07-28`).
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main():
    url, token, mode, *calls = sys.argv[1:]
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            tools = await client.list_tools()
            out = {
                "protocol_version": client.session.protocol_version,
                "tools": [
                    {"name": t.name, "annotations": t.annotations.model_dump(exclude_none=True) if t.annotations else {}}
                    for t in tools.tools
                ],
                "calls": [],
            }
            for name, args in zip(calls[::2], calls[1::2]):
                r = await client.call_tool(name, json.loads(args))
                out["calls"].append(r.model_dump(mode="json", by_alias=True, exclude_none=True))
    print(json.dumps(out))


asyncio.run(main())
