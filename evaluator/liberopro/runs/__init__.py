"""Runs of many episodes: evaluation, shards and workers, the run summary, comparison, review, demos."""
