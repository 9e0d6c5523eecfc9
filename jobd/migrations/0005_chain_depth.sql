-- How deep in a chain a run is (0: not chained): a chain stops at 8, whatever the saved
-- tasks say.
ALTER TABLE jobs ADD COLUMN chain_depth INTEGER NOT NULL DEFAULT 0;
