// Recent changes to a service: the commits that changed its files, newest first, with their authors,
// the files touched and what they reference. Merge commits are left out.
// Answers "what changed in billing lately, and why?".
// @param service: key of the service, e.g. service:billing
// @param since: only commits from this date on, e.g. 2026-04-01; null for all (default: null)
// @param limit: rows to return (default: 20)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (s:Service {project: $project, key: $service})-[sc:CONTAINS]->(f:File)<-[ch:CHANGED]-(c:Commit)
WHERE NOT coalesce(c.is_merge, false) AND ($since IS NULL OR c.committed_at >= $since)
  AND all(x IN [s, sc, f, ch, c] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH c, f ORDER BY f.key
WITH c, collect(DISTINCT f.key) AS files
RETURN c.key AS commit, c.committed_at AS date, c.subject AS subject,
       COLLECT {
         MATCH (p:Person)-[a:AUTHORED]->(c)
         WHERE CASE WHEN $as_of IS NULL THEN a.valid_to IS NULL
                    ELSE a.valid_from <= $as_of AND coalesce(a.valid_to > $as_of, true) END
         RETURN DISTINCT p.key AS person ORDER BY person
       } AS authors,
       files,
       COLLECT {
         MATCH (c)-[r:REFERENCES|IMPLEMENTS|FIXES]->(x:Node)
         WHERE CASE WHEN $as_of IS NULL THEN r.valid_to IS NULL
                    ELSE r.valid_from <= $as_of AND coalesce(r.valid_to > $as_of, true) END
         RETURN DISTINCT x.key AS ref ORDER BY ref
       } AS refs
ORDER BY date DESC, commit
LIMIT $limit
