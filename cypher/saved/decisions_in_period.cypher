// Decisions referenced by commits in a period: which decision records the commits between $since and
// $until cite or implement, how many commits did, and the first and last of them.
// Answers "which architecture decisions were we acting on last quarter?".
// @param since: start of the period, e.g. 2026-03-01; null for the beginning (default: null)
// @param until: end of the period (not included), e.g. 2026-04-01; null for now (default: null)
// @param limit: rows to return (default: 50)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (c:Commit {project: $project})-[r:REFERENCES|IMPLEMENTS]->(d:Decision)
WHERE ($since IS NULL OR c.committed_at >= $since) AND ($until IS NULL OR c.committed_at < $until)
  AND all(x IN [c, r, d] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH d, c, collect(DISTINCT toLower(type(r))) AS how ORDER BY c.committed_at
RETURN d.key AS decision, d.title AS title, d.status AS status, count(c) AS commits,
       min(c.committed_at) AS first, max(c.committed_at) AS last,
       collect(c.short_sha + ' ' + c.subject) AS commit_subjects
ORDER BY commits DESC, decision
LIMIT $limit
