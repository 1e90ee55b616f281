// Blast radius of a function: everything that calls it, directly or through other callers, up to
// $depth calls away, with the service each caller belongs to and who owns it (owners of the caller,
// of the class and file around it, or of its service).
// Answers "if I change this function, what can break and whom do I tell?".
// @param symbol: key of the function or method, e.g. sym:services/ledger/internal/store/store.go::Store.AppendBatch
// @param depth: how many calls away to look, 1 to 6 (default: 3)
// @param limit: rows to return (default: 100)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (target:Node {project: $project, key: $symbol})
MATCH calls = (caller:Node)-[:CALLS*1..6]->(target)
WHERE length(calls) <= $depth AND caller <> target
  AND all(x IN nodes(calls) + relationships(calls) WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH caller, min(length(calls)) AS distance
OPTIONAL MATCH up = (container:Node)-[:CONTAINS*1..4]->(caller)
WHERE all(x IN nodes(up) + relationships(up) WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH caller, distance, collect(DISTINCT container) AS containers
UNWIND containers + caller AS owned
OPTIONAL MATCH (owner:Node)-[o:OWNS]->(owned)
WHERE all(x IN [owner, o] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH caller, distance, containers, owner ORDER BY owner.key
RETURN caller.key AS caller, distance, [c IN containers WHERE c:Service | c.key] AS services,
       collect(DISTINCT owner.key) AS owners
ORDER BY distance, caller
LIMIT $limit
