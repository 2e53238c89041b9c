"""The test suite: the pure core and glue (unit), and a real control plane (integration)."""
