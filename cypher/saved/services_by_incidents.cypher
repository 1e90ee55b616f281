// Services ranked by incidents: how many incidents hit each service, directly or through its files
// and symbols, with their severities and the latest start.
// Answers "which services break most often?". Services without incidents come last, with 0.
// @param limit: rows to return (default: 20)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (s:Service {project: $project})
WHERE CASE WHEN $as_of IS NULL THEN s.valid_to IS NULL
           ELSE s.valid_from <= $as_of AND coalesce(s.valid_to > $as_of, true) END
OPTIONAL MATCH hit = (i:Incident)-[:AFFECTED]->(:Node)<-[:CONTAINS*0..3]-(s)
WHERE all(x IN nodes(hit) + relationships(hit) WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
WITH DISTINCT s, i
ORDER BY i.started_at DESC
WITH s, collect(i) AS incidents
RETURN s.key AS service, size(incidents) AS incidents, [i IN incidents | i.key] AS incident_keys,
       [i IN incidents | i.severity] AS severities, incidents[0].started_at AS latest
ORDER BY incidents DESC, service
LIMIT $limit
