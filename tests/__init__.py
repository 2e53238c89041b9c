"""The test suite: unit tests of the pure core and glue, integration tests on a real control plane."""
