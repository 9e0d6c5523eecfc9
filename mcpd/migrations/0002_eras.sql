-- The lifecycle each server speaks, found on its first connection (a protocol version:
-- '2025-11-25' with initialize, '2026-07-28' with server/discover; '' until known).
ALTER TABLE servers ADD COLUMN era TEXT NOT NULL DEFAULT '';
