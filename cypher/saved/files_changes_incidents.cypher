// Files changed most often that are tied to the most incidents: an incident counts for a file when
// it affected or was caused by the file or code in it, or when a commit that caused, resolved or
// fixed it changed the file. Ranked by incidents, then by changes (merge commits left out).
// Answers "where do changes and incidents pile up?".
// @param since: count commits from this date on, e.g. 2026-01-01; null counts all history (default: null)
// @param limit: rows to return (default: 20)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (f:File {project: $project})
WHERE CASE WHEN $as_of IS NULL THEN f.valid_to IS NULL
           ELSE f.valid_from <= $as_of AND coalesce(f.valid_to > $as_of, true) END
OPTIONAL MATCH (c:Commit)-[ch:CHANGED]->(f)
WHERE NOT coalesce(c.is_merge, false) AND ($since IS NULL OR c.committed_at >= $since)
  AND all(x IN [c, ch] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH f, count(DISTINCT c) AS changes, max(c.committed_at) AS last_change
WHERE changes > 0
WITH f, changes, last_change, COLLECT {
    MATCH hit = (i:Incident)-[:AFFECTED|CAUSED_BY]->(:Node)<-[:CONTAINS*0..3]-(f)
    WHERE all(x IN nodes(hit) + relationships(hit) WHERE
              CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                   ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
    RETURN i.key AS incident
  UNION
    MATCH hit = (i:Incident)-[:CAUSED_BY|RESOLVED_BY|FIXES]-(:Commit)-[:CHANGED]->(f)
    WHERE all(x IN nodes(hit) + relationships(hit) WHERE
              CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                   ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
    RETURN i.key AS incident
} AS incidents
RETURN f.key AS file, size(incidents) AS incidents, changes, incidents AS incident_keys, last_change
ORDER BY incidents DESC, changes DESC, file
LIMIT $limit
