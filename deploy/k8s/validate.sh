#!/usr/bin/env bash
# Renders deploy/k8s with kustomize (kubectl's built-in) and checks every resource against the
# Kubernetes OpenAPI schemas with kubernetes-validate (PyPI), strictly: a misspelt or misplaced
# field fails, not only a wrong type. Offline: neither tool talks to a cluster.
#
# usage: deploy/k8s/validate.sh
#   K8S_VALIDATE_VERSIONS  Kubernetes versions to check against (default "1.30.0 1.37.0": the
#                          oldest the manifests claim to support and the newest the validator
#                          knows)
#   TRAINSCALER_K8S_VENV   where kubernetes-validate is installed (default
#                          /tmp/trainscaler-k8s-venv)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# Pinned so that a new validator release cannot change the verdict on unchanged manifests.
VALIDATOR_VERSION=1.37.0
venv="${TRAINSCALER_K8S_VENV:-/tmp/trainscaler-k8s-venv}"
versions="${K8S_VALIDATE_VERSIONS:-1.30.0 1.37.0}"

installed_version() {
    "$venv/bin/python" -c \
        'import importlib.metadata as m; print(m.version("kubernetes-validate"))' 2>/dev/null
}

if [[ ! -x "$venv/bin/kubernetes-validate" || "$(installed_version)" != "$VALIDATOR_VERSION" ]]; then
    echo "installing kubernetes-validate $VALIDATOR_VERSION into $venv"
    if ! python3 -m venv "$venv"; then
        # Debian ships venv support separately from python3.
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv
        python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install --quiet "kubernetes-validate==$VALIDATOR_VERSION"
fi

rendered=$(mktemp --suffix=.yaml)
trap 'rm -f "$rendered"' EXIT

if command -v kubectl >/dev/null 2>&1; then
    kubectl kustomize "$here" >"$rendered"
    echo "rendered $here with $(kubectl version --client 2>/dev/null | grep -i kustomize || echo kustomize)"
else
    # Without kustomize the files are checked as written; the namespace, labels and image that
    # kustomization.yaml adds are then not part of the check.
    echo "warning: kubectl not found (it carries kustomize); validating the resource files unrendered" >&2
    for f in "$here"/*.yaml; do
        [[ "$(basename "$f")" == kustomization.yaml ]] && continue
        printf -- '---\n' >>"$rendered"
        cat "$f" >>"$rendered"
    done
fi

# Every kind the kustomization should produce, so that a resource dropped from it is noticed.
for kind in ConfigMap Secret Deployment Service PodDisruptionBudget; do
    grep -q "^kind: $kind\$" "$rendered" || {
        echo "error: the rendered manifests have no $kind" >&2
        exit 1
    }
done

for v in $versions; do
    "$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "$rendered"
    echo "deploy/k8s: valid against Kubernetes $v (strict)"
done
