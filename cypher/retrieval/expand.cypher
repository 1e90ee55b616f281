// One breadth-first step of graph retrieval (graphmem/retrieval/graph.py): every relationship of
// the frontier nodes, in either direction, that holds at $as_of (open ones when $as_of is null)
// and whose other end holds too. The embedded store answers the same question in memory.
//
// Parameters: $project, $keys (frontier node keys), $as_of (ISO time or null).
UNWIND $keys AS k
MATCH (a:Node {project: $project, key: k})-[r]-(b:Node)
WHERE CASE WHEN $as_of IS NULL THEN r.valid_to IS NULL AND b.valid_to IS NULL
           ELSE r.valid_from <= $as_of AND (r.valid_to IS NULL OR r.valid_to > $as_of)
                AND b.valid_from <= $as_of AND (b.valid_to IS NULL OR b.valid_to > $as_of) END
RETURN k AS origin, startNode(r).key AS src, type(r) AS type, endNode(r).key AS dst
