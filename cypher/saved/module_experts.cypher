// Who knows a module best: the people who authored (or co-authored) the commits that changed the
// module's files, ranked by commits, then by lines changed. Merge commits are left out.
// Answers "whom do I ask about this folder?".
// @param module: path prefix of the module, e.g. services/billing/api/ (end a folder with /)
// @param since: count commits from this date on, e.g. 2026-01-01; null counts all history (default: null)
// @param limit: rows to return (default: 10)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (f:File {project: $project})<-[ch:CHANGED]-(c:Commit)<-[a:AUTHORED]-(p:Person)
WHERE f.key STARTS WITH 'file:' + $module
  AND NOT coalesce(c.is_merge, false) AND ($since IS NULL OR c.committed_at >= $since)
  AND all(x IN [f, ch, c, a, p] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
RETURN p.key AS person, p.name AS name, count(DISTINCT c) AS commits,
       sum(coalesce(ch.insertions, 0) + coalesce(ch.deletions, 0)) AS lines_changed,
       count(DISTINCT f) AS files_touched, max(c.committed_at) AS last_commit
ORDER BY commits DESC, lines_changed DESC, person
LIMIT $limit
