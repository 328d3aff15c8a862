"""The four-stage loop: generate, filter, benchmark, route."""
