"""Renders the Helm chart offline as `helm template` does, with Helm's own Go engine.

There is no `helm` binary in the package registries this project installs from, so this uses
helm-python-sdk (PyPI), which bundles Helm v4's Go library (chart loader, values coalescing,
values.schema.json validation, the template engine with Sprig, and `helm lint`) as a shared
library. What it renders is what `helm template` renders from the same chart and values.

usage: python render.py CHART VALUES.yaml [--name NAME] [--namespace NS] [--kube-version V]
Prints the manifests as one YAML stream (`# Source:` before each template's output, as helm
does) and exits non-zero with Helm's message if the values fail the chart's schema, the chart
fails `helm lint --strict`, or a template fails.
"""

import argparse
import sys

import helm_python
import yaml


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("chart")
    p.add_argument("values")
    p.add_argument("--name", default="trainscaler")
    p.add_argument("--namespace", default="trainscaler")
    p.add_argument("--kube-version", default="v1.30.0")
    a = p.parse_args()

    with open(a.values) as f:
        values = yaml.safe_load(f) or {}
    chart = helm_python.Chart.load(a.chart)
    try:
        # What an install checks first: the user's values over the chart's, against the schema.
        chart.validate_schema(chart.merge_values(values))
        report = helm_python.lint(
            a.chart, values, strict=True, namespace=a.namespace, kube_version=a.kube_version
        )
        # Severity 1 is information (e.g. "icon is recommended"); warnings fail, as --strict.
        problems = [m for m in report["messages"] if m["severity"] >= 2] + [
            {"path": "", "error": e} for e in report["errors"]
        ]
        if problems:
            for m in problems:
                print(f"helm lint: {m['path']}: {m['error']}", file=sys.stderr)
            return 1
        manifests = chart.render(values, name=a.name, namespace=a.namespace, is_install=True)
    except helm_python.HelmError as e:
        print(f"helm: {e}", file=sys.stderr)
        return 1

    for path in sorted(manifests):
        text = manifests[path]
        if path.endswith("NOTES.txt") or not text.strip():
            continue
        print(f"---\n# Source: {path}")
        print(text.strip("\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
