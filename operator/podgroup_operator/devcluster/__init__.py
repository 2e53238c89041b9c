"""The embedded local cluster: a real control plane built from Debian's source, and sim nodes.

No container engine runs on our machines, so `dev-cluster` runs etcd, kube-apiserver and
kube-controller-manager as plain processes on loopback, and `sim-nodes` stands in for kubelets.
"""
