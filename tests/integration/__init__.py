"""Tests on the real control plane (apiserver, etcd, controller-manager) with sim nodes."""
