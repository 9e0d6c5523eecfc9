-- OAuth credentials of servers that ask for them (client id, tokens), as JSON sealed
-- under mcpd's key, bound to the server's id; gone with the server.
CREATE TABLE oauth (
    server TEXT PRIMARY KEY NOT NULL REFERENCES servers (id) ON DELETE CASCADE,
    sealed TEXT NOT NULL,
    updated_at_ms INTEGER NOT NULL
) STRICT;
