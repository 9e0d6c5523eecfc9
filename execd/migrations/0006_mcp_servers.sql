-- The stdio MCP servers an admin registered: the exact launch mcpd may start for each,
-- by its digest. mcpd can start nothing else in the mcp-server profiles.
CREATE TABLE mcp_servers (
    server_id TEXT PRIMARY KEY NOT NULL,
    digest TEXT NOT NULL,
    -- The launch (command, args, env keys, cwd, network) as canonical JSON.
    launch TEXT NOT NULL,
    registered_by TEXT NOT NULL,
    registered_at_ms INTEGER NOT NULL
) STRICT;
