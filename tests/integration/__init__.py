"""Tests on the real control plane (kube-apiserver, etcd, kube-controller-manager) with sim nodes."""
