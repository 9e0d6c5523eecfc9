-- The definition each pin was taken of (title, description and input schema as capped,
-- annotations; JSON), so an admin sees what changed; '' for a tool never reviewed.
ALTER TABLE pins ADD COLUMN definition TEXT NOT NULL DEFAULT '';
