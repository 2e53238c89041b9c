#!/usr/bin/env bash
# Build kube-apiserver and kube-controller-manager (and, when asked, kube-scheduler for the tests and
# `bench scale --versus kube-scheduler`) from Debian's own kubernetes source package.
#
# No container engine runs on our machines and nothing but Debian and PyPI is reachable, so the
# control plane is compiled from `apt-get source kubernetes` (v1.20.2 on bookworm) and cached
# outside the repository. Usage: build-kubernetes.sh CACHE_DIR [COMPONENT...]
# (default components: kube-apiserver kube-controller-manager). Only missing binaries are built.
# Prints nothing but progress; the binaries land in CACHE_DIR/bin.
set -euo pipefail

cache=${1:?usage: build-kubernetes.sh CACHE_DIR [COMPONENT...]}
shift
if [[ $# -gt 0 ]]; then components=("$@"); else components=(kube-apiserver kube-controller-manager); fi
missing=()
for component in "${components[@]}"; do
  [[ -x "$cache/bin/$component" ]] || missing+=("$component")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "control plane cached in $cache/bin"
  exit 0
fi

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

# A deb-src entry on the same mirror as the machine's own `deb` source.
if ! grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  mirror=$(grep -rhsE '^URIs: .*debian/?$' /etc/apt/sources.list.d/*.sources | head -n1 | awk '{print $2}')
  if [[ -z "$mirror" ]]; then
    mirror=$(grep -hsE '^deb [^ ]+debian/? bookworm ' /etc/apt/sources.list | head -n1 | awk '{print $2}')
  fi
  mirror=${mirror:-http://deb.debian.org/debian}
  printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" | as_root tee /etc/apt/sources.list.d/podgroup-operator-src.sources >/dev/null
fi
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  golang-go etcd-server rsync dpkg-dev golang-github-modern-go-reflect2-dev >/dev/null

work="$cache/src"
rm -rf "$work"
mkdir -p "$work"
(cd "$work" && apt-get source -qq kubernetes >/dev/null 2>&1)
src=$(find "$work" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes-*' | head -n1)

# Go >= 1.18 breaks the vendored reflect2 v1.0.1 (kube-apiserver segfaults iterating maps on the
# first custom-resource write); Debian's 1.0.2 copy works.
rm -rf "$src/vendor/github.com/modern-go/reflect2"
cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$src/vendor/github.com/modern-go/reflect2"
rm -f "$src/vendor/github.com/modern-go/reflect2/go.mod"

# GOPATH mode, as Debian's debian/rules builds it.
mkdir -p "$src/.go/src/k8s.io"
ln -sfn "$src" "$src/.go/src/k8s.io/kubernetes"
(
  cd "$src/.go/src/k8s.io/kubernetes"
  export GOPATH="$src/.go" GO111MODULE=off GOFLAGS= CGO_ENABLED=0 GOCACHE="$cache/gocache"
  make WHAT="${missing[*]/#/cmd/}" >"$cache/build.log" 2>&1
)
mkdir -p "$cache/bin"
for component in "${missing[@]}"; do cp "$src/_output/bin/$component" "$cache/bin/"; done
rm -rf "$work" "$cache/gocache"
echo "built ${missing[*]} into $cache/bin"
