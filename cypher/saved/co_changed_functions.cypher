// Functions changed together: pairs of functions and methods that the same commits modified, a sign
// of coupling (or of a missing abstraction). Merge commits are left out.
// Answers "what else usually changes when this function changes?".
// @param symbol: only pairs with this function or method; null for every pair (default: null)
// @param min_commits: keep pairs changed together at least this many times (default: 2)
// @param limit: rows to return (default: 50)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (c:Commit {project: $project})-[m1:MODIFIED]->(a:Symbol)
WHERE NOT coalesce(c.is_merge, false) AND a.symbol_kind IN ['function', 'method']
  AND ($symbol IS NULL OR a.key = $symbol)
  AND all(x IN [c, m1, a] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
MATCH (c)-[m2:MODIFIED]->(b:Symbol)
WHERE b <> a AND b.symbol_kind IN ['function', 'method'] AND ($symbol IS NOT NULL OR a.key < b.key)
  AND all(x IN [m2, b] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH a, b, c ORDER BY c.committed_at
WITH a, b, collect(c.short_sha) AS commits
WHERE size(commits) >= $min_commits
RETURN a.key AS function, b.key AS changed_with, size(commits) AS times, commits
ORDER BY times DESC, function, changed_with
LIMIT $limit
