#!/usr/bin/env python3
"""Cut the bundled catalog (catalog/<provider>/vms.csv) out of full SkyPilot-layout catalogs.

Keeps the rows trainscaler reads: accelerator rows, and for GCP also the host VM rows that
GPUs attach to. Rows are copied unchanged, so prices stay the clouds' public list prices.

usage: scripts/bundle_catalog.py SOURCE_DIR   (a folder with <provider>/vms.csv files)
"""
import csv
import re
import sys
from pathlib import Path

PROVIDERS = ["aws", "gcp", "azure", "lambda", "nebius", "vast"]
GCP_HOSTS = re.compile(r"^(a2-(highgpu|ultragpu|megagpu)|a3-(highgpu|megagpu|ultragpu)|a4-highgpu|g2-standard)-|^n1-(standard|highmem|highcpu)-[0-9]+$")


def keep(provider, row):
    if provider == "gcp" and row["InstanceType"]:
        return bool(GCP_HOSTS.match(row["InstanceType"]))
    name = row.get("AcceleratorName") or ""
    return bool(name) and not name.startswith("tpu-")


def main(source):
    out_root = Path(__file__).resolve().parent.parent / "catalog"
    for provider in PROVIDERS:
        src = Path(source) / provider / "vms.csv"
        with src.open(newline="") as f:
            reader = csv.DictReader(f)
            rows = [r for r in reader if keep(provider, r)]
            fields = reader.fieldnames
        dst = out_root / provider / "vms.csv"
        dst.parent.mkdir(parents=True, exist_ok=True)
        with dst.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        print(f"{provider}: {len(rows)} rows -> {dst}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/catalog")
