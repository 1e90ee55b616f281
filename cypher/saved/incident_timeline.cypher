// Timeline of an incident, in time order: the commits that caused it and their authors, its start,
// the services and code it affected, its end, the commits that resolved or fixed it and their
// authors, and the decisions it refers to (dated by the decision).
// Answers "what happened in INC-042, and who did what?".
// @param incident: key of the incident, e.g. incident:INC-042
// @param limit: rows to return (default: 100)
// @param as_of: read the graph as it was at this ISO date or time, e.g. 2026-03-01; null reads the current facts (default: null)
MATCH (i:Incident {project: $project, key: $incident})
CALL (i) {
  MATCH (i)-[r:CAUSED_BY]->(c:Commit)
  WHERE all(x IN [r, c] WHERE
            CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                 ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  RETURN c.committed_at AS at, 1 AS rank, 'caused by commit' AS event, c.key AS key, c.subject AS detail, c AS commit
  UNION
  MATCH (i)-[r:CAUSED_BY]->(code:Node)
  WHERE NOT code:Commit AND all(x IN [r, code] WHERE
            CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                 ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  RETURN i.started_at AS at, 2 AS rank, 'caused by code' AS event, code.key AS key, code.name AS detail,
         null AS commit
  UNION
  RETURN i.started_at AS at, 3 AS rank, 'incident started' AS event, i.key AS key,
         coalesce(i.severity + ': ', '') + i.title AS detail, null AS commit
  UNION
  MATCH (i)-[r:AFFECTED]->(hit:Node)
  WHERE all(x IN [r, hit] WHERE
            CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                 ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  RETURN i.started_at AS at, 4 AS rank, 'affected' AS event, hit.key AS key, hit.name AS detail, null AS commit
  UNION
  RETURN i.ended_at AS at, 5 AS rank, 'incident ended' AS event, i.key AS key,
         toString(i.duration_minutes) + ' minutes' AS detail, null AS commit
  UNION
  MATCH (i)-[r:RESOLVED_BY|FIXES]-(c:Commit)
  WHERE all(x IN [r, c] WHERE
            CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                 ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  RETURN c.committed_at AS at, 6 AS rank, 'fixed by commit' AS event, c.key AS key, c.subject AS detail,
         c AS commit
  UNION
  MATCH (i)-[r:REFERENCES]->(d:Decision)
  WHERE all(x IN [r, d] WHERE
            CASE WHEN $as_of IS NULL THEN x.valid_to IS NULL
                 ELSE x.valid_from <= $as_of AND coalesce(x.valid_to > $as_of, true) END)
  RETURN d.date AS at, 7 AS rank, 'refers to decision' AS event, d.key AS key, d.title AS detail, null AS commit
}
WITH at, rank, event, key, detail,
     COLLECT {
       MATCH (p:Person)-[a:AUTHORED]->(commit)
       WHERE CASE WHEN $as_of IS NULL THEN a.valid_to IS NULL
                  ELSE a.valid_from <= $as_of AND coalesce(a.valid_to > $as_of, true) END
       RETURN DISTINCT p.key AS person ORDER BY person
     } AS who
ORDER BY at, rank, key
LIMIT $limit
RETURN at, event, key, detail, who
