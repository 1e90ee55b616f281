// A person's recent commits, newest first: date, subject, how many files each changed, and the
// decisions, incidents and tickets it references, implements or fixes.
// Answers "what has Ana been working on?".
// @param person: key of the person, e.g. person:ana@acme.dev
// @param since: only commits from this date on, e.g. 2026-04-01; null for all (default: null)
// @param limit: rows to return (default: 20)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (p:Person {project: $project, key: $person})-[a:AUTHORED]->(c:Commit)
WHERE ($since IS NULL OR c.committed_at >= $since)
  AND all(x IN [p, a, c] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
RETURN c.key AS commit, c.committed_at AS date, c.subject AS subject, a.role AS role,
       COUNT {
         MATCH (c)-[ch:CHANGED]->(:File)
         WHERE CASE WHEN $as_of IS NULL THEN ch.valid_to IS NULL
                    ELSE ch.valid_from <= $as_of AND coalesce(ch.valid_to > $as_of, true) END
       } AS files_changed,
       COLLECT {
         MATCH (c)-[r:REFERENCES|IMPLEMENTS|FIXES]->(x:Node)
         WHERE CASE WHEN $as_of IS NULL THEN r.valid_to IS NULL
                    ELSE r.valid_from <= $as_of AND coalesce(r.valid_to > $as_of, true) END
         RETURN DISTINCT x.key AS ref ORDER BY ref
       } AS refs
ORDER BY date DESC, commit
LIMIT $limit
