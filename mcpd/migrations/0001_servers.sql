-- mcpd's configured upstream servers, and the tool definitions pinned on first sight.
CREATE TABLE servers (
    id TEXT PRIMARY KEY NOT NULL,
    -- The configuration as JSON, each secret value sealed under mcpd's key.
    config TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE pins (
    server TEXT NOT NULL REFERENCES servers (id) ON DELETE CASCADE,
    tool TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    pinned_at_ms INTEGER NOT NULL,
    PRIMARY KEY (server, tool)
) STRICT;
