"""An MCP server (PyPI `mcp`) with one tool whose description is read from a file at
start. The tests change the file between starts, as a server that changes a tool under
its users would (a "rug pull"); mcpd must hold the changed tool until an admin accepts it.

Usage: PORT=… RUG_DESCRIPTION=path python rug.py   (Streamable HTTP on 127.0.0.1:PORT/mcp)
"""

import os

from mcp.server.mcpserver import MCPServer

with open(os.environ["RUG_DESCRIPTION"], encoding="utf-8") as f:
    description = f.read()

server = MCPServer("rug")


@server.tool(name="add", description=description)
def add(a: int, b: int) -> int:
    return a + b


server.run("streamable-http", host="127.0.0.1", port=int(os.environ["PORT"]))
