// Orphan code: files nobody owns (no owner on the file nor on the service holding it), then files
// whose owners never changed them (no commit by an owning person or by a member of an owning team):
// code nobody answers for, or that nobody who answers for it has worked on.
// Answers "which code has no owner who knows it?".
// @param limit: rows to return (default: 100)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (f:File {project: $project})
WHERE CASE WHEN $as_of IS NULL THEN f.valid_to IS NULL
           ELSE f.valid_from <= $as_of AND coalesce(f.valid_to > $as_of, true) END
OPTIONAL MATCH (svc:Service)-[sc:CONTAINS]->(f)
WHERE all(x IN [svc, sc] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH f, collect(svc) AS services
WITH f, services, COLLECT {
    UNWIND [f] + services AS owned
    MATCH (o:Node)-[r:OWNS]->(owned)
    WHERE all(x IN [o, r] WHERE
              CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                   ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
    RETURN DISTINCT o
  } AS owners
WITH f, services, owners, [o IN owners WHERE o:Person] + COLLECT {
    UNWIND owners AS team
    MATCH (p:Person)-[m:MEMBER_OF]->(team)
    WHERE all(x IN [p, m] WHERE
              CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                   ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
    RETURN DISTINCT p
  } AS accountable
OPTIONAL MATCH (author:Person)-[a:AUTHORED]->(c:Commit)-[ch:CHANGED]->(f)
WHERE NOT coalesce(c.is_merge, false) AND all(x IN [author, a, c, ch] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH f, services, owners, accountable, collect(DISTINCT author) AS authors, max(c.committed_at) AS last_change
WITH f, services, owners, authors, last_change,
     CASE WHEN size(owners) = 0 THEN 'no owner'
          WHEN none(p IN authors WHERE p IN accountable) THEN 'owners never changed it' END AS reason
WHERE reason IS NOT NULL
RETURN f.key AS file, reason, [s IN services | s.key] AS services, [o IN owners | o.key] AS owners,
       [p IN authors | p.key] AS authors, last_change
ORDER BY reason = 'no owner' DESC, file
LIMIT $limit
