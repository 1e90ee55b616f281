// Hotspots: functions and classes that many callers depend on and that change often, scored by
// callers times changes, with the incidents that hit or were caused by them. Merge commits are left out.
// Answers "where would a refactoring or more tests pay off most?".
// @param limit: rows to return (default: 20)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (s:Symbol {project: $project})
WHERE CASE WHEN $as_of IS NULL THEN s.valid_to IS NULL
           ELSE s.valid_from <= $as_of AND coalesce(s.valid_to > $as_of, true) END
WITH s,
     COUNT {
       MATCH (caller:Node)-[r:CALLS]->(s)
       WHERE caller <> s AND all(x IN [caller, r] WHERE
             CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                  ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
     } AS callers,
     COUNT {
       MATCH (c:Commit)-[m:MODIFIED]->(s)
       WHERE NOT coalesce(c.is_merge, false) AND all(x IN [c, m] WHERE
             CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                  ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
     } AS changes
WHERE callers > 0 AND changes > 0
RETURN s.key AS symbol, s.symbol_kind AS kind, callers, changes, callers * changes AS score,
       COLLECT {
         MATCH (i:Incident)-[r:AFFECTED|CAUSED_BY]->(s)
         WHERE CASE WHEN $as_of IS NULL THEN r.valid_to IS NULL
                    ELSE r.valid_from <= $as_of AND coalesce(r.valid_to > $as_of, true) END
         RETURN DISTINCT i.key AS incident ORDER BY incident
       } AS incidents
ORDER BY score DESC, symbol
LIMIT $limit
