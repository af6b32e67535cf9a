"""Transcript harvesters, one module per source."""
