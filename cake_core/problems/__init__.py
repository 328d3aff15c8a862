"""The problem contract and the built-in problems."""
