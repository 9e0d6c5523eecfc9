"""An MCP server (PyPI `mcp`) with a slow tool and a fast one, to show that calls to one
server run side by side: `sleep` takes as many seconds as it is asked, `fast` answers at
once, and `status` says how many sleeps are running now and how many were cancelled (by
the caller's deadline or its going away) — so a test sees a call cancelled at the
server, not only given up on by the broker.

Usage: PORT=… [SLOW_TRANSPORT=sse] python slow.py
(Streamable HTTP on 127.0.0.1:PORT/mcp, or the legacy HTTP+SSE transport on /sse; with
no PORT, stdio)
"""

import os

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("slow")
sleeps = {"running": 0, "cancelled": 0}


@server.tool(name="sleep", description="Sleeps for the seconds asked, then says so.")
async def sleep(seconds: float) -> str:
    sleeps["running"] += 1
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        sleeps["cancelled"] += 1
        raise
    finally:
        sleeps["running"] -= 1
    return f"slept {seconds} s"


@server.tool(name="fast", description="Answers at once.")
def fast() -> str:
    return "fast answered"


@server.tool(name="status", description="Sleeps running now, and sleeps cancelled.")
def status() -> str:
    return f"running={sleeps['running']} cancelled={sleeps['cancelled']}"


if "PORT" in os.environ:
    transport = os.environ.get("SLOW_TRANSPORT", "streamable-http")
    server.run(transport, host="127.0.0.1", port=int(os.environ["PORT"]))
else:
    server.run("stdio")
