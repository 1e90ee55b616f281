// Chains of decisions superseding one another: each row is one chain, from a decision nothing
// supersedes down to the oldest one it replaced, with titles, statuses and dates.
// Answers "what did ADR-5 replace, and is there a newer decision than this one?".
// @param decision: only chains through this decision, e.g. adr:3; null for every chain (default: null)
// @param limit: rows to return (default: 50)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH chain = (newest:Decision {project: $project})-[:SUPERSEDES*1..20]->(oldest:Decision)
WHERE all(x IN nodes(chain) + relationships(chain) WHERE
          CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
               ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  AND ($decision IS NULL OR any(n IN nodes(chain) WHERE n.key = $decision))
  AND NOT EXISTS {
    MATCH (:Decision)-[s:SUPERSEDES]->(newest)
    WHERE CASE WHEN $as_of IS NULL THEN s.valid_to IS NULL
               ELSE s.valid_from <= $as_of AND coalesce(s.valid_to > $as_of, true) END }
  AND NOT EXISTS {
    MATCH (oldest)-[s:SUPERSEDES]->(:Decision)
    WHERE CASE WHEN $as_of IS NULL THEN s.valid_to IS NULL
               ELSE s.valid_from <= $as_of AND coalesce(s.valid_to > $as_of, true) END }
RETURN [n IN nodes(chain) | n.key] AS chain, [n IN nodes(chain) | n.title] AS titles,
       [n IN nodes(chain) | n.status] AS statuses, [n IN nodes(chain) | n.date] AS dates,
       length(chain) AS replacements
ORDER BY replacements DESC, chain[0]
LIMIT $limit
