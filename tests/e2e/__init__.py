"""End-to-end: the shipped examples, applied with kubectl as users would, on the real cluster."""
