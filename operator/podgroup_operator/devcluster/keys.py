"""Keys the sim kubelets read and write: annotations that script a pod's run and the label
of the nodes they register. Dev cluster and tests only: production code never imports
devcluster/, so none of these can reach a real cluster's behaviour.
"""

SIM_ANNOTATION_SUCCEED_AFTER = "sim.podgroup.x-k8s.io/succeed-after-seconds"
"""A running pod on a sim node succeeds (exit code 0) after this many seconds."""
SIM_ANNOTATION_FAIL_AFTER = "sim.podgroup.x-k8s.io/fail-after-seconds"
"""A running pod on a sim node fails after this many seconds."""
SIM_ANNOTATION_EXIT_CODE = "sim.podgroup.x-k8s.io/exit-code"
"""Exit code for the failure above (default 1)."""
SIM_ANNOTATION_START_DELAY = "sim.podgroup.x-k8s.io/start-delay-seconds"
"""Overrides the sim kubelet's default delay before a bound pod turns Running."""
SIM_NODE_LABEL = "sim.podgroup.x-k8s.io/node"
"""Label on Nodes registered by `podgroup-operator sim-nodes`; the value is the pool's prefix."""
