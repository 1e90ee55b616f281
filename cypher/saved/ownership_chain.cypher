// Ownership chain of a symbol: the symbol, the class and file around it and the service holding the
// file, each with its owners (teams and people) and, for each owner, the team's members or the
// person's teams. Step 0 is the symbol itself; a row without owner shows a step nobody owns.
// Answers "who owns this code, at every level?".
// @param symbol: key of a symbol or file, e.g. sym:services/billing/api/handlers.py::InvoiceHandler.post
// @param limit: rows to return (default: 100)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (s:Node {project: $project, key: $symbol})
OPTIONAL MATCH up = (container:Node)-[:CONTAINS*1..4]->(s)
WHERE all(x IN nodes(up) + relationships(up) WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH s, container, min(length(up)) AS distance
ORDER BY distance
WITH s, collect({node: container, step: distance}) AS ups
UNWIND [{node: s, step: 0}] + [u IN ups WHERE u.node IS NOT NULL] AS level
WITH level.node AS node, level.step AS step
OPTIONAL MATCH (owner:Node)-[o:OWNS]->(node)
WHERE all(x IN [owner, o] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
OPTIONAL MATCH (owner)-[m:MEMBER_OF]-(related:Node)
WHERE all(x IN [m, related] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH step, node, owner, related ORDER BY related.key
RETURN step, node.kind AS kind, node.key AS node, owner.key AS owner, owner.kind AS owner_kind,
       collect(DISTINCT related.key) AS members_or_teams
ORDER BY step, owner
LIMIT $limit
