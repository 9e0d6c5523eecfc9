"""The PyPI `mcp` client as an agent whose human answers elicitations: calls `run` with a
command and, if Argos asks (an elicitation in 2025-11-25, an input request in 2026-07-28,
both reaching `elicitation_callback`), answers as told. Prints one JSON object: the
questions asked and the call's result.

Usage: python assent.py URL TOKEN MODE COMMAND ANSWER [PURPOSE]   (ANSWER: approve | decline)
"""

import asyncio
import json
import sys

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main():
    url, token, mode, command, answer = sys.argv[1:6]
    purpose = sys.argv[6] if len(sys.argv) > 6 else "the assent test"
    asked = []

    async def on_elicitation(context, params):
        asked.append({"message": params.message,
                      "schema": params.requested_schema if hasattr(params, "requested_schema") else None})
        if answer == "approve":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode,
                          elicitation_callback=on_elicitation) as client:
            r = await client.call_tool("run", {"command": command, "purpose": purpose})
            print(json.dumps({"asked": asked,
                              "result": r.model_dump(mode="json", by_alias=True, exclude_none=True)}))


asyncio.run(main())
