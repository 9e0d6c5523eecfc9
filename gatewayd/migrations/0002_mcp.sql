-- The MCP endpoint (/mcp): what a token's agent may do, the admin's setting of which
-- principals get which tools, and the record of every tool call.

-- A token limited to the tools that only read (by their annotations).
ALTER TABLE api_tokens ADD COLUMN mcp_read_only INTEGER NOT NULL DEFAULT 0;
-- `run` may ask the human in the agent's client to approve a non-destructive change.
ALTER TABLE api_tokens ADD COLUMN mcp_elicitation INTEGER NOT NULL DEFAULT 0;

-- Admin settings, one JSON document per key.
CREATE TABLE settings (
    key            TEXT PRIMARY KEY,
    value          TEXT NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    updated_by     TEXT NOT NULL
) STRICT;

-- Every tool call through /mcp; summaries are at most 500 characters.
CREATE TABLE mcp_activity (
    id           INTEGER PRIMARY KEY,
    at_ms        INTEGER NOT NULL,
    principal    TEXT NOT NULL,
    token_id     INTEGER NOT NULL,
    token_name   TEXT NOT NULL,
    tool         TEXT NOT NULL,
    input        TEXT NOT NULL,
    output       TEXT NOT NULL,
    duration_ms  INTEGER NOT NULL,
    outcome      TEXT NOT NULL          -- ok | error | refused
) STRICT;
CREATE INDEX mcp_activity_by_principal ON mcp_activity (principal, id);
CREATE INDEX mcp_activity_by_tool ON mcp_activity (tool, id);
