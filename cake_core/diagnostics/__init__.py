"""Diagnostics: records, rendering and explanations."""
