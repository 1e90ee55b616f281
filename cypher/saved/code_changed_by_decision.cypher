// Code changed because of a decision: the functions, classes and files that commits implementing or
// referencing the decision record modified, and code that declares it implements the decision.
// Answers "show me all code that changed because of ADR-5". Merge commits are left out: they
// repeat the changes of their branch.
// @param decision: key of the decision record, e.g. adr:5
// @param limit: rows to return (default: 200)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (d:Decision {project: $project, key: $decision})
CALL (d) {
  MATCH (c:Commit)-[why:IMPLEMENTS|REFERENCES]->(d)
  MATCH (c)-[touched:MODIFIED|CHANGED]->(code:Node)
  WHERE NOT coalesce(c.is_merge, false)
    AND all(x IN [c, why, touched, code] WHERE
            CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                 ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  RETURN code, c AS commit, type(why) AS via
  UNION
  MATCH (code:Node)-[why:IMPLEMENTS]->(d)
  WHERE NOT code:Commit
    AND all(x IN [code, why] WHERE
            CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                 ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  RETURN code, null AS commit, 'declared' AS via
}
WITH code, via, commit ORDER BY commit.committed_at
RETURN code.key AS code, code.kind AS kind, collect(DISTINCT via) AS via,
       collect(DISTINCT commit.short_sha) AS commits, max(commit.committed_at) AS last_change
ORDER BY kind DESC, code
LIMIT $limit
