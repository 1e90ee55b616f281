"""Extractors: turn sources (code, git history, decision records, incidents, ownership) into graph facts."""
