"""Cake IR: nodes, text format, serialization and structural hash."""
