#!/usr/bin/env bash
# Installs the Mermaid version pinned in package.json once, into the cache beside the control
# plane ($PODGROUP_OPERATOR_CACHE, default ~/.cache/podgroup-operator/mermaid-VERSION), and prints
# that directory. Needs node and npm; without them it fails, naming them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "install.sh: $tool not found; install Node.js 20 or later (apt-get install nodejs npm)" >&2; exit 1; }
done
version=$(node -p "require('$here/package.json').dependencies.mermaid")
dest="${PODGROUP_OPERATOR_CACHE:-$HOME/.cache/podgroup-operator}/mermaid-$version"
if [ ! -f "$dest/node_modules/mermaid/package.json" ]; then
  staging="$dest.partial.$$"
  trap 'rm -rf "$staging"' EXIT
  mkdir -p "$staging"
  cp "$here/package.json" "$staging/"
  npm install --prefix "$staging" --no-audit --no-fund --omit=dev --loglevel=error >&2
  # Another run may have finished first: its copy is as good as ours.
  mv -T "$staging" "$dest" 2>/dev/null || [ -f "$dest/node_modules/mermaid/package.json" ]
fi
echo "$dest"
