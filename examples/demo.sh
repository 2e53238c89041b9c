#!/usr/bin/env bash
# `make demo`: the dev cluster, sim nodes and the operator, then the examples, on this machine.
# `make demo-down` (this script with `down`) stops everything it started.
set -euo pipefail
state=${1:?usage: demo.sh STATE_DIR [down]}
action=${2:-up}
repo=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$repo/.venv/bin:$PATH"
mkdir -p "$state"

stop_pid() {
  local file=$1
  [[ -f $file ]] || return 0
  local pid; pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

# The operator serves admission webhooks here; the apiserver calls them through the webhook
# configurations that `podgroup-operator webhooks install` writes, trusting the CA of the
# directory where `run --webhooks local` keeps its certificates.
webhook_port=18443
webhook_certs=$HOME/.cache/podgroup-operator/webhook-certs

if [[ $action == down ]]; then
  # First the webhook configurations: left behind, they would make the apiserver call a port
  # nobody serves, and every PodGroup write would fail until they are removed.
  if podgroup-operator dev-cluster status --state-dir "$state/cluster" >/dev/null 2>&1; then
    eval "$(podgroup-operator dev-cluster env --state-dir "$state/cluster")"
    podgroup-operator webhooks uninstall || echo "warning: webhook configurations not removed" >&2
  fi
  stop_pid "$state/operator.pid"
  stop_pid "$state/sim-nodes.pid"
  podgroup-operator dev-cluster down --state-dir "$state/cluster"
  exit 0
fi

echo "==> control plane (etcd, kube-apiserver, kube-controller-manager) on loopback"
eval "$(podgroup-operator dev-cluster up --state-dir "$state/cluster")"
kubectl apply -f "$repo/crds/" >/dev/null
kubectl wait --for=condition=Established crd/podgroups.scheduling.x-k8s.io crd/topologies.scheduling.x-k8s.io \
  --timeout=60s >/dev/null

echo "==> sim nodes: 4 x (8 cpu, 32Gi, 2 GPUs) in 2 blocks of 2 racks, acting as their kubelet"
stop_pid "$state/sim-nodes.pid"
setsid podgroup-operator sim-nodes --topology block=2,rack=2 --cpu 8 --memory 32Gi --gpu 2 \
  --name-prefix demo-node --start-delay 1 >"$state/sim-nodes.log" 2>&1 < /dev/null &
echo $! >"$state/sim-nodes.pid"

echo "==> the operator (podgroup-operator run), webhooks on 127.0.0.1:$webhook_port"
stop_pid "$state/operator.pid"
setsid podgroup-operator run --liveness http://127.0.0.1:18080/healthz \
  --webhooks local --webhook-port "$webhook_port" \
  --metrics-address 127.0.0.1:18081 >"$state/operator.log" 2>&1 < /dev/null &
echo $! >"$state/operator.pid"
# Ready: informers synced and the admission server accepting (/healthz answers before that).
for _ in $(seq 300); do
  python3 -c 'import urllib.request,sys; urllib.request.urlopen("http://127.0.0.1:18081/readyz", timeout=1)' 2>/dev/null && break
  sleep 0.2
done
podgroup-operator webhooks install --url "https://127.0.0.1:$webhook_port" --cert-dir "$webhook_certs"
for _ in $(seq 100); do
  [[ $(kubectl get nodes --no-headers 2>/dev/null | grep -c ' Ready') -ge 4 ]] && break
  sleep 0.3
done

echo "==> kubectl apply -f examples/gang-basic.yaml"
kubectl apply -f "$repo/examples/gang-basic.yaml"
for _ in $(seq 120); do
  phase=$(kubectl get podgroup train-basic -o jsonpath='{.status.phase}' 2>/dev/null || true)
  [[ $phase == Running ]] && break
  sleep 0.5
done
echo
kubectl get podgroups -o wide
echo
kubectl get pods -o wide
echo
cat <<MSG
The operator is running (log: $state/operator.log), with sim nodes (log: $state/sim-nodes.log).
Try it:
  export KUBECONFIG=$state/cluster/kubeconfig
  kubectl get podgroups -o wide          # phase, counters, why a gang waits
  PATH=$repo/.venv/bin:\$PATH kubectl podgroup -A   # every gang and why it waits (plugin)
  kubectl apply -f examples/gang-basic.yaml         # the example; examples/crdjob/ embeds PodGroups
  kubectl apply -f examples/gang-topology.yaml      # a gang kept in one block of the fabric
  kubectl apply -f examples/gang-subgroups.yaml     # replicas, each whole in its own rack
  PATH=$repo/.venv/bin:\$PATH kubectl podgroup fabric --levels example.com/block,example.com/rack
                                                    # the fabric: free room, gangs on it
Stop everything with: make demo-down
MSG
