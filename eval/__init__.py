"""The multi-hop evaluation harness: dataset adapters and generators (see ``eval.synthetic``)."""
