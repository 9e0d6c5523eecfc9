-- The wall clock a launch runs under, in milliseconds (0: none), so a client can show the
-- time left (a terminal's end is announced before it comes).
ALTER TABLE executions ADD COLUMN timeout_ms INTEGER NOT NULL DEFAULT 0;
