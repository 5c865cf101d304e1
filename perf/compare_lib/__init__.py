"""Modules of perf/compare: the systems it runs, the machine facts, and the report."""
