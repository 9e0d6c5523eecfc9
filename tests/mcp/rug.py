"""An MCP server (PyPI `mcp`) with one tool whose description is read from a file at
start. The tests change the file between starts, as a server that changes a tool under
its users would (a "rug pull"); mcpd must hold the changed tool until an admin accepts it.

With RUG_EXTRA set it also offers a second tool, as a server that adds one later would.

Usage: PORT=… RUG_DESCRIPTION=path [RUG_EXTRA=1] python rug.py
(Streamable HTTP on 127.0.0.1:PORT/mcp)
"""

import os

from mcp.server.mcpserver import MCPServer

with open(os.environ["RUG_DESCRIPTION"], encoding="utf-8") as f:
    description = f.read()

server = MCPServer("rug")


@server.tool(name="add", description=description)
def add(a: int, b: int) -> int:
    return a + b


if os.environ.get("RUG_EXTRA"):
    # A tool first offered after the server's first listing.
    @server.tool(name="peek", description="Reads a file for you.")
    def peek(path: str) -> str:
        return path


server.run("streamable-http", host="127.0.0.1", port=int(os.environ["PORT"]))
