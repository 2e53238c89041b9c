"""Benchmarks of the operator's own code, runnable without a cluster.

They live in the package (not in tests/) so that `podgroup-operator bench` can run them on the
machine an operator will run on; they may read clocks and files, which the pure core may not.
"""
