"""Checks the custom resources in a rendered manifest stream against their CRDs' schemas.

kubernetes-validate knows only the core Kubernetes kinds. For KEDA's (ScaledObject,
ScaledJob, TriggerAuthentication) and the Prometheus Operator's (ServiceMonitor,
PrometheusRule) this uses models generated from those projects' CRD schemas (cloudcoil's
model packages on PyPI): a missing required field, a wrong type or an unknown enum value fails
validation, and a field the schema does not have (a misspelling, a wrong level) fails too,
as `kubectl apply --validate=strict` would.

usage: python check_crds.py RENDERED.yaml
Prints one line per custom resource checked; exits non-zero on the first problems found in
any of them, and for any kind outside the core API that it has no schema for.
"""

import sys

import yaml
from cloudcoil.models.keda import v1alpha1 as keda
from cloudcoil.models.prometheus_operator import v1 as monitoring
from pydantic import ValidationError

MODELS = {
    ("keda.sh/v1alpha1", "ScaledObject"): keda.ScaledObject,
    ("keda.sh/v1alpha1", "ScaledJob"): keda.ScaledJob,
    ("keda.sh/v1alpha1", "TriggerAuthentication"): keda.TriggerAuthentication,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): monitoring.ServiceMonitor,
    ("monitoring.coreos.com/v1", "PrometheusRule"): monitoring.PrometheusRule,
}


def is_core(api_version: str) -> bool:
    """Kinds kubernetes-validate checks: the core group and groups without a dot in them
    (apps, batch, policy) or under k8s.io."""
    group = api_version.rpartition("/")[0]
    return group == "" or "." not in group or group.endswith(".k8s.io")


def unknown_fields(given, kept, path: str):
    """Fields of `given` that validation dropped: the schema has no such field there."""
    if isinstance(given, dict) and isinstance(kept, dict):
        for k, v in given.items():
            if k not in kept:
                yield f"{path}.{k}"
            else:
                yield from unknown_fields(v, kept[k], f"{path}.{k}")
    elif isinstance(given, list) and isinstance(kept, list):
        for i, (g, k) in enumerate(zip(given, kept)):
            yield from unknown_fields(g, k, f"{path}[{i}]")


def quantities_as_strings(node):
    """Resource quantities written as numbers, as strings. Kubernetes' Quantity takes both;
    the generated models' int-or-string pattern accepts only strings."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("limits", "requests") and isinstance(v, dict):
                node[k] = {q: str(n) if isinstance(n, (int, float)) else n for q, n in v.items()}
            else:
                quantities_as_strings(v)
    elif isinstance(node, list):
        for v in node:
            quantities_as_strings(v)


def main() -> int:
    with open(sys.argv[1]) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    failed = False
    for doc in docs:
        api, kind = doc.get("apiVersion", ""), doc.get("kind", "")
        name = doc.get("metadata", {}).get("name", "?")
        if is_core(api):
            continue
        model = MODELS.get((api, kind))
        if model is None:
            print(f"error: no schema for {api} {kind} {name}", file=sys.stderr)
            failed = True
            continue
        quantities_as_strings(doc)
        try:
            obj = model.model_validate(doc, strict=True)
        except (ValidationError, TypeError) as e:
            print(f"error: {kind} {name}: {e}", file=sys.stderr)
            failed = True
            continue
        kept = obj.model_dump(by_alias=True, exclude_unset=True, mode="json")
        extra = list(unknown_fields(doc, kept, ""))
        if extra:
            print(f"error: {kind} {name}: unknown fields {', '.join(extra)}", file=sys.stderr)
            failed = True
            continue
        print(f"{api} {kind} {name}: valid against its CRD schema (strict)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
