// Incidents that touched code a team owns: the services, files and symbols the team (or one of its
// members) owns, and everything inside them, when an incident affected that code, was caused by it,
// or was caused by a commit that changed it.
// Answers "which incidents landed on the payments team's code?".
// @param team: key of the team, e.g. team:payments
// @param limit: rows to return (default: 50)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (t:Team {project: $project, key: $team})
CALL (t) {
  MATCH (t)-[o:OWNS]->(owned:Node)
  WHERE all(x IN [o, owned] WHERE
            CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                 ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  RETURN owned
  UNION
  MATCH (t)<-[m:MEMBER_OF]-(member:Person)-[o:OWNS]->(owned:Node)
  WHERE all(x IN [m, member, o, owned] WHERE
            CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                 ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  RETURN owned
}
MATCH inside = (owned)-[:CONTAINS*0..3]->(code:Node)
WHERE all(x IN nodes(inside) + relationships(inside) WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH DISTINCT code
CALL (code) {
  MATCH (i:Incident)-[r:AFFECTED|CAUSED_BY]->(code)
  WHERE all(x IN [i, r] WHERE
            CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                 ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  RETURN i, toLower(type(r)) AS how
  UNION
  MATCH (i:Incident)-[r:CAUSED_BY]->(c:Commit)-[ch:CHANGED|MODIFIED]->(code)
  WHERE all(x IN [i, r, c, ch] WHERE
            CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                 ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  RETURN i, 'caused by commit ' + c.short_sha AS how
}
WITH i, code, how ORDER BY code.key
RETURN i.key AS incident, i.title AS title, i.severity AS severity, i.started_at AS started_at,
       collect(DISTINCT code.key) AS owned_code, collect(DISTINCT how) AS how
ORDER BY started_at DESC, incident
LIMIT $limit
