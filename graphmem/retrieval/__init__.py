"""Retrieval: indexes, retrievers, fusion and reranking."""
