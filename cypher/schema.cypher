// graphmem schema for Neo4j 5. Applied by GraphStore.ensure_schema(); every statement is idempotent.
// Statements are separated by semicolons at the end of a line.

// Every node carries :Node besides its kind's label; (project, key) identifies it.
CREATE CONSTRAINT graphmem_node_key IF NOT EXISTS
FOR (n:Node) REQUIRE (n.project, n.key) IS UNIQUE;

// Withdrawing a source file finds its elements through source_path and, for the few elements that
// several sources assert, through multi (only those have the property, so that index stays small).
CREATE INDEX graphmem_node_source IF NOT EXISTS
FOR (n:Node) ON (n.project, n.source_path);

CREATE INDEX graphmem_node_multi IF NOT EXISTS
FOR (n:Node) ON (n.project, n.multi);

// No full-text index on names: retrieval keeps its own BM25 index and name catalog, and a Lucene
// index updated on every commit cost a quarter of the write throughput (bench/bench_stores.py).
// Stores created before this change had one; it goes.
DROP INDEX graphmem_node_text IF EXISTS;

// Text chunks for retrieval, linked (n:Node)-[:HAS_CHUNK]->(c:Chunk).
CREATE CONSTRAINT graphmem_chunk_id IF NOT EXISTS
FOR (c:Chunk) REQUIRE (c.project, c.id) IS UNIQUE;

CREATE INDEX graphmem_chunk_node IF NOT EXISTS
FOR (c:Chunk) ON (c.project, c.node_key);

CREATE INDEX graphmem_chunk_source IF NOT EXISTS
FOR (c:Chunk) ON (c.project, c.source_path);

// Project state: settings such as the last ingested commit, and content hashes of sources.
CREATE CONSTRAINT graphmem_meta IF NOT EXISTS
FOR (m:GraphmemMeta) REQUIRE (m.project, m.name) IS UNIQUE;

CREATE CONSTRAINT graphmem_source_state IF NOT EXISTS
FOR (s:GraphmemSource) REQUIRE (s.project, s.path) IS UNIQUE;

// Per relationship type, repeated by the engine for every type of the model ({TYPE} and {type} are
// filled from that allow-list, never from user input). Relationship indexes need a type.
CREATE INDEX graphmem_rel_{type}_source IF NOT EXISTS
FOR ()-[r:{TYPE}]-() ON (r.source_path);

CREATE INDEX graphmem_rel_{type}_multi IF NOT EXISTS
FOR ()-[r:{TYPE}]-() ON (r.multi);
