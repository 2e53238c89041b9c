#!/usr/bin/env bash
# The quick start (docs/guides/quickstart.md) as one script: from a kind cluster (or any cluster
# kubectl points at) to a gang of two busybox pods Running.
#
#   deploy/quickstart.sh                 # every step below, in order
#   deploy/quickstart.sh STEP [ARG]      # one step: cluster, image, overlay DIR, install, check,
#                                        # plugin, gang; `down` removes what they made
#
# Settings, from the environment:
#   IMAGE=podgroup-operator:dev      the operator's image, with a tag; pushed when LOAD=push
#   LOAD=kind                        kind: `kind load` it into KIND_CLUSTER; push: `docker push`
#   KIND_CLUSTER=podgroup            the kind cluster (`cluster` makes it when absent)
#   INSTALL=kustomize                kustomize or helm
#   CERTS=self-managed               self-managed or cert-manager (installed first)
#   CERT_MANAGER_VERSION=v1.16.2     the cert-manager release applied when CERTS=cert-manager
#   COMPONENTS=""                    deploy/components added to the overlay, space-separated, for
#                                    clusters older than 1.29 (docs/guides/install.md)
#   PLUGIN_VENV=~/.local/share/podgroup-operator/venv   where `plugin` installs kubectl-podgroup
#   WORKDIR=my-install               where `install` writes its kustomize overlay
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
IMAGE=${IMAGE:-podgroup-operator:dev}
LOAD=${LOAD:-kind}
KIND_CLUSTER=${KIND_CLUSTER:-podgroup}
INSTALL=${INSTALL:-kustomize}
CERTS=${CERTS:-self-managed}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.16.2}
COMPONENTS=${COMPONENTS:-}
PLUGIN_VENV=${PLUGIN_VENV:-$HOME/.local/share/podgroup-operator/venv}
WORKDIR=${WORKDIR:-$repo/my-install}
namespace=podgroup-operator

fail() {
  echo "quickstart: $*" >&2
  exit 1
}

# IMAGE split into what kustomize's `images:` and the chart's `image.*` values take: the name
# (registry and path, a registry port included) and the tag after the last colon of the last part.
image_name() {
  local last=${IMAGE##*/}
  [[ $last == *:* ]] || fail "IMAGE=$IMAGE has no tag: give one, e.g. IMAGE=$IMAGE:dev"
  echo "${IMAGE%:*}"
}
image_tag() {
  echo "${IMAGE##*:}"
}

check_settings() {
  image_name >/dev/null
  [[ $LOAD == kind || $LOAD == push ]] || fail "LOAD=$LOAD: use kind or push"
  [[ $INSTALL == kustomize || $INSTALL == helm ]] || fail "INSTALL=$INSTALL: use kustomize or helm"
  [[ $CERTS == self-managed || $CERTS == cert-manager ]] ||
    fail "CERTS=$CERTS: use self-managed or cert-manager"
}

step_cluster() {
  [[ $LOAD == kind ]] || return 0
  if ! kind get clusters | grep -qx "$KIND_CLUSTER"; then
    kind create cluster --name "$KIND_CLUSTER"
  fi
  kubectl config use-context "kind-$KIND_CLUSTER"
}

step_image() {
  docker build -t "$IMAGE" "$repo"
  if [[ $LOAD == kind ]]; then
    kind load docker-image "$IMAGE" --name "$KIND_CLUSTER"
  else
    docker push "$IMAGE"
  fi
}

# A path relative to DIR: kustomize takes bases and components only by relative paths.
relative_to() {
  python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$1" "$(cd "$2" && pwd)"
}

# A kustomize overlay in DIR: the chosen certificate overlay with the operator's image replaced,
# and the components of COMPONENTS.
step_overlay() {
  local dir=${1:?usage: quickstart.sh overlay DIR}
  local component
  for component in $COMPONENTS; do
    [[ -d $repo/deploy/components/$component ]] ||
      fail "COMPONENTS: no deploy/components/$component (see docs/guides/install.md, With kustomize)"
  done
  mkdir -p "$dir"
  local base
  base=$(relative_to "$repo/deploy/overlays/$CERTS" "$dir")
  cat >"$dir/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $base
images:
  - name: podgroup-operator
    newName: $(image_name)
    newTag: "$(image_tag)"
EOF
  if [[ -n $COMPONENTS ]]; then
    echo "components:" >>"$dir/kustomization.yaml"
    for component in $COMPONENTS; do
      echo "  - $(relative_to "$repo/deploy/components/$component" "$dir")" >>"$dir/kustomization.yaml"
    done
  fi
  echo "$dir/kustomization.yaml"
}

step_cert_manager() {
  [[ $CERTS == cert-manager ]] || return 0
  kubectl apply -f "https://github.com/cert-manager/cert-manager/releases/download/$CERT_MANAGER_VERSION/cert-manager.yaml"
  for deployment in cert-manager cert-manager-cainjector cert-manager-webhook; do
    kubectl -n cert-manager rollout status "deployment/$deployment" --timeout=5m
  done
}

step_install() {
  step_cert_manager
  if [[ $INSTALL == helm ]]; then
    helm install podgroup-operator "$repo/deploy/helm/podgroup-operator" -n "$namespace" \
      --create-namespace --set image.repository="$(image_name)" --set image.tag="$(image_tag)" \
      --set certificates.mode="$CERTS"
  else
    step_overlay "$WORKDIR" >/dev/null
    kubectl apply -k "$WORKDIR"
  fi
  kubectl -n "$namespace" rollout status deployment/podgroup-operator --timeout=5m
}

# Every replica ready by its own /readyz (through the API server's pod proxy), and the webhooks
# answering: a server-side dry run of the gang goes through them.
step_check() {
  kubectl -n "$namespace" get pods
  local pod
  for pod in $(kubectl -n "$namespace" get pods -l app.kubernetes.io/name=podgroup-operator -o name); do
    kubectl get --raw "/api/v1/namespaces/$namespace/pods/${pod#pod/}:8081/proxy/readyz"
    echo
  done
  kubectl apply --dry-run=server -f "$repo/examples/quickstart-gang.yaml"
}

step_plugin() {
  python3 -m venv "$PLUGIN_VENV"
  "$PLUGIN_VENV/bin/pip" install -q "$repo"
  echo "kubectl podgroup is $PLUGIN_VENV/bin/kubectl-podgroup: add $PLUGIN_VENV/bin to PATH"
}

step_gang() {
  kubectl apply -f "$repo/examples/quickstart-gang.yaml"
  local phase=""
  for _ in $(seq 150); do
    phase=$(kubectl get podgroup hello -o jsonpath='{.status.phase}')
    [[ $phase == Running ]] && break
    sleep 2
  done
  PATH="$PLUGIN_VENV/bin:$PATH" kubectl podgroup describe hello
  [[ $phase == Running ]] || fail "the gang hello is ${phase:-without a phase} after 5 minutes"
  echo "the gang hello is Running"
}

# The gang, then the install (kubectl delete -k removes the CRDs with it; helm uninstall leaves
# them), then the kind cluster when the script made it.
step_down() {
  kubectl delete --ignore-not-found -f "$repo/examples/quickstart-gang.yaml"
  if [[ $INSTALL == helm ]]; then
    helm uninstall podgroup-operator -n "$namespace"
  else
    step_overlay "$WORKDIR" >/dev/null
    kubectl delete -k "$WORKDIR"
  fi
  if [[ $LOAD == kind ]]; then
    kind delete cluster --name "$KIND_CLUSTER"
  fi
}

main() {
  check_settings
  local step=${1:-all}
  case $step in
    all)
      step_cluster
      step_image
      step_install
      step_check
      step_plugin
      step_gang
      ;;
    cluster | image | install | check | plugin | gang | down) "step_$step" ;;
    overlay) step_overlay "${2:-}" ;;
    *) fail "unknown step $step: use cluster, image, overlay DIR, install, check, plugin, gang or down" ;;
  esac
}

main "$@"
