-- What a job reported about its runtime (libtorch version, BLAS library, thread counts, ...): the
-- "meta" objects of its metric lines, merged key by key as a JSON object of strings.

ALTER TABLE runs ADD COLUMN meta TEXT NOT NULL DEFAULT '{}';
