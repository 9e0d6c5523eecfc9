"""Waits without polling, as an agent of either era would: asks `run` for a change (which
answers "approval required" with the execution's resource), subscribes to that resource
(`resources/subscribe` in 2025-11-25, a `subscriptions/listen` stream in 2026-07-28), says
so on stdout, then reads the resource each time it is told it changed, until the
execution has ended. Prints one JSON line per step.

Usage: python wait.py URL TOKEN MODE COMMAND
"""

import asyncio
import json
import sys
import warnings

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

FINAL = {"succeeded", "failed", "timed_out", "killed", "rejected", "lost",
         "containment_unavailable", "teardown_failed"}


def say(**v):
    print(json.dumps(v), flush=True)


async def main():
    url, token, mode, command = sys.argv[1:5]
    updates = asyncio.Queue()

    async def on_message(message):
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            await updates.put(root.params.uri)

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode,
                          message_handler=on_message) as client:
            r = await client.call_tool("run", {"command": command, "purpose": "wait for it"})
            text = r.content[0].text
            assert text.startswith("approval required\n"), text
            answer = json.loads(text.split("\n", 1)[1])
            uri = answer["resource"]

            async def read():
                got = await client.read_resource(uri)
                return json.loads(got.contents[0].text)

            async def follow(next_update):
                facts = await read()
                say(step="read", status=facts["status"])
                while facts["status"] not in FINAL:
                    changed = await asyncio.wait_for(next_update(), 60)
                    assert changed == uri, changed
                    facts = await read()
                    say(step="notified", status=facts["status"])
                say(step="done", facts=facts)

            if mode == "legacy":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await client.subscribe_resource(uri)
                say(step="subscribed", approval=answer["approval"]["id"], uri=uri)
                await follow(updates.get)
            else:
                async with client.listen(resource_subscriptions=[uri]) as sub:
                    say(step="subscribed", approval=answer["approval"]["id"], uri=uri,
                        honored=sub.honored.model_dump(by_alias=True, exclude_none=True))
                    events = sub.__aiter__()

                    async def next_event():
                        return (await events.__anext__()).uri

                    await follow(next_event)


asyncio.run(main())
