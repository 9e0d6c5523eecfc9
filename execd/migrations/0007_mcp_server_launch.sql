-- The launch each registered stdio MCP server runs as now: a new start ends the previous
-- one (mcpd restarted, or lost its connection), so none is left running unattended.
ALTER TABLE mcp_servers ADD COLUMN launch_id TEXT NOT NULL DEFAULT '';
