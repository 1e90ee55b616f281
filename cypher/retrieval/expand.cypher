// One breadth-first step of graph retrieval (graphmem/retrieval/graph.py): every relationship of
// the frontier nodes, in either direction, that holds at $as_of (open ones when $as_of is null)
// and whose other end holds too. The embedded store answers the same question in memory.
//
// One row per frontier node with its relationships as [type, other end's key, outgoing] lists:
// the driver decodes a few long rows about three times faster than one short row per relationship.
//
// Parameters: $project, $keys (frontier node keys), $as_of (ISO time or null).
UNWIND $keys AS k
MATCH (a:Node {project: $project, key: k})-[r]-(b:Node)
WHERE CASE WHEN $as_of IS NULL THEN r.valid_to IS NULL AND b.valid_to IS NULL
           ELSE r.valid_from <= $as_of AND (r.valid_to IS NULL OR r.valid_to > $as_of)
                AND b.valid_from <= $as_of AND (b.valid_to IS NULL OR b.valid_to > $as_of) END
RETURN k AS origin, collect([type(r), b.key, startNode(r) = a]) AS rels
