// Everything one step from a node: its relationships in both directions with the other end's key,
// kind and name. A starting point for exploring any key.
// Answers "what is this node connected to?".
// @param key: any graphmem key, e.g. service:billing
// @param type: only relationships of this type, e.g. CALLS; null for every type (default: null)
// @param limit: rows to return (default: 100)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (n:Node {project: $project, key: $key})-[r]-(m:Node)
WHERE ($type IS NULL OR type(r) = $type)
  AND all(x IN [r, m] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
RETURN CASE WHEN startNode(r) = n THEN 'out' ELSE 'in' END AS direction, type(r) AS relationship,
       m.key AS other, m.kind AS kind, m.name AS name
ORDER BY relationship, direction, other
LIMIT $limit
