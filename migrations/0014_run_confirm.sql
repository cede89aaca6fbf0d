-- search.confirm (server/seeds/confirm.h): once an experiment's search is over, each variant's
-- chosen grid point gets fresh seeds whose values alone the tuned table reports, so the choice
-- and the estimate rest on different seeds. A run says whether it is one of those; every run
-- stored before is a search run.
ALTER TABLE runs ADD COLUMN confirm INTEGER NOT NULL DEFAULT 0 CHECK (confirm IN (0, 1));
