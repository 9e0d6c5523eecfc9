"""Reads one resource with the PyPI `mcp` client and prints the result or the error.

Usage: python read.py URL TOKEN URI
"""

import asyncio
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main():
    url, token, uri = sys.argv[1:4]
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            try:
                r = await client.read_resource(uri)
                print(r.model_dump_json())
            except Exception as e:  # the server's refusal is the answer
                print(f"error: {e}")


asyncio.run(main())
