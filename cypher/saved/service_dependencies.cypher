// The service dependency graph: which service depends on which, how sure the extractor was, and the
// source files that show the dependency.
// Answers "what does billing call, and who calls billing?".
// @param service: only dependencies of or on this service, e.g. service:billing; null for all (default: null)
// @param limit: rows to return (default: 200)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (a:Service {project: $project})-[d:DEPENDS_ON]->(b:Service)
WHERE ($service IS NULL OR $service IN [a.key, b.key])
  AND all(x IN [a, d, b] WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
RETURN a.key AS service, b.key AS depends_on, d.confidence AS confidence,
       coalesce(d.sources, [d.source_path]) AS evidence
ORDER BY service, depends_on
LIMIT $limit
