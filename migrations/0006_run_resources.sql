-- What a run's spec asks for, as columns instead of re-read from its config JSON: the code
-- snapshot it pins (indexed: scrap and the snapshot listing count runs per snapshot), the command
-- of a [job] run (empty: tae-train), and the attempts resources.max_attempts grants (taectl retry
-- grants as many again). Runs stored before this migration get theirs from their config.

ALTER TABLE runs ADD COLUMN snapshot_id TEXT;
ALTER TABLE runs ADD COLUMN command TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN attempts_granted INTEGER NOT NULL DEFAULT 1;

UPDATE runs SET
  snapshot_id = CASE WHEN json_type(config, '$."job.snapshot"') = 'text'
                     THEN json_extract(config, '$."job.snapshot"') END,
  command = CASE WHEN json_type(config, '$."job.command"') = 'text'
                 THEN json_extract(config, '$."job.command"') ELSE '' END,
  attempts_granted = CASE WHEN json_type(config, '$."resources.max_attempts"') = 'integer'
                               AND json_extract(config, '$."resources.max_attempts"') >= 1
                          THEN json_extract(config, '$."resources.max_attempts"') ELSE 1 END
WHERE json_valid(config);

CREATE INDEX runs_by_snapshot ON runs (snapshot_id) WHERE snapshot_id IS NOT NULL;
