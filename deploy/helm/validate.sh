#!/usr/bin/env bash
# Renders the Helm chart with every value set in trainscaler/ci/ and checks the output:
#   - rendering: Helm v4's own Go library through helm-python-sdk (render.py says why not the
#     helm binary): values against values.schema.json, `helm lint --strict`, then the
#     templates, as `helm template` would;
#   - core kinds (Deployment, Service, Job, RBAC, ...): kubernetes-validate --strict against
#     the Kubernetes 1.30 and 1.37 schemas, as deploy/k8s/validate.sh does;
#   - KEDA and Prometheus Operator kinds: check_crds.py, strictly, against models generated
#     from those projects' CRD schemas;
#   - the PrometheusRule's rule group: promtool check rules;
#   - values the chart must refuse (no database, a misspelt key) are refused.
# Offline: nothing talks to a cluster.
#
# usage: deploy/helm/validate.sh
#   K8S_VALIDATE_VERSIONS   Kubernetes versions to check against (default "1.30.0 1.37.0")
#   TRAINSCALER_HELM_VENV   where the Python tools are installed (default
#                           /tmp/trainscaler-helm-venv)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
chart="$here/trainscaler"

# Pinned so that a new release cannot change the verdict on an unchanged chart.
PACKAGES=(
    helm-python-sdk==0.2.2
    kubernetes-validate==1.37.0
    PyYAML==6.0.4
    cloudcoil==0.6.0
    cloudcoil-models-keda==2.16.1.0
    cloudcoil-models-prometheus-operator==0.80.1.0
)
venv="${TRAINSCALER_HELM_VENV:-/tmp/trainscaler-helm-venv}"
versions="${K8S_VALIDATE_VERSIONS:-1.30.0 1.37.0}"
stamp="$venv/.trainscaler-packages"

if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "${PACKAGES[*]}" ]]; then
    echo "installing ${PACKAGES[*]} into $venv"
    if ! python3 -m venv "$venv"; then
        # Debian ships venv support separately from python3.
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv
        python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install --quiet "${PACKAGES[@]}"
    echo "${PACKAGES[*]}" >"$stamp"
fi
command -v promtool >/dev/null 2>&1 ||
    { echo "error: promtool not found (apt-get install --no-install-recommends prometheus)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py="$venv/bin/python"

for values in "$chart"/ci/*-values.yaml; do
    set_name=$(basename "$values" -values.yaml)
    out="$work/$set_name.yaml"
    # Helm's Go runtime logs a line for each template `fail`; only the verdict matters here.
    "$py" "$here/render.py" "$chart" "$values" >"$out"
    echo "deploy/helm ($set_name): rendered $(grep -c '^kind: ' "$out") objects with Helm's engine"
    for v in $versions; do
        # Custom kinds are only warned about here; check_crds.py checks them below.
        if ! "$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "$out" >"$work/kv.log" 2>&1; then
            cat "$work/kv.log" >&2
            echo "error: deploy/helm ($set_name) fails Kubernetes $v's schemas" >&2
            exit 1
        fi
        grep -v "Couldn't find schema for kind \(ScaledObject\|ScaledJob\|TriggerAuthentication\|ServiceMonitor\|PrometheusRule\) " \
            "$work/kv.log" || true
        echo "deploy/helm ($set_name): core objects valid against Kubernetes $v (strict)"
    done
    "$py" "$here/check_crds.py" "$out" | sed "s|^|deploy/helm ($set_name): |"
    if grep -q '^kind: PrometheusRule$' "$out"; then
        "$py" - "$out" "$work/$set_name-rules.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") == "PrometheusRule"]
yaml.safe_dump({"groups": [g for d in docs for g in d["spec"]["groups"]]}, open(sys.argv[2], "w"))
EOF
        promtool check rules "$work/$set_name-rules.yaml" | sed "s|^|deploy/helm ($set_name): |"
    fi
done

# Values the chart must refuse, each with the reason it should give.
refuse() {
    local why="$1" expect="$2" values="$work/refused.yaml"
    cat >"$values"
    if "$py" "$here/render.py" "$chart" "$values" >/dev/null 2>"$work/refused.err"; then
        echo "error: deploy/helm rendered values that must be refused: $why" >&2
        exit 1
    fi
    grep -q -- "$expect" "$work/refused.err" || {
        echo "error: deploy/helm refused $why without saying \"$expect\":" >&2
        cat "$work/refused.err" >&2
        exit 1
    }
    echo "deploy/helm: refuses $why"
}
refuse "values without a database" "database.existingSecret" <<<'{}'
refuse "a misspelt key" "additional properties 'replicas' not allowed" <<<'{database: {existingSecret: db}, replicas: 2}'
refuse "mutual TLS without TLS" "needs grpc.tls.enabled" \
    <<<'{database: {existingSecret: db}, grpc: {tls: {clientCA: {enabled: true}}}}'
refuse "anonymous gRPC with no NetworkPolicy" "gRPC needs a guard" \
    <<<'{database: {existingSecret: db}, networkPolicy: {enabled: false}}'
refuse "the admin-key Job with a URL in values" "needs database.existingSecret" \
    <<<'{database: {url: "postgres://u:p@db/x"}, adminKey: {bootstrap: job}}'
