-- An agent's placement labels (slice, worker, pool, provider, addr, zone: server/registry/
-- placement.h) bound to its credential, as a JSON object: assigned by the provider that minted
-- it, or bound at an enrolled agent's first registration. NULL: none bound yet (an enrolled
-- agent that has not registered since it enrolled). A new credential (a provider's re-key, an
-- enrolment) replaces them.
ALTER TABLE agent_credentials ADD COLUMN placement TEXT;
