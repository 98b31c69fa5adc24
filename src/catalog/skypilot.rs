//! The SkyPilot catalog layout (`vms.csv`): one row per instance type and region or zone,
//! columns read by header name because their order differs per cloud.
//!
//! Only accelerator offerings are kept. GCP is special: a GPU offering is a host VM row plus
//! an accelerator row in the same zone (see [`gcp_host`]).

use std::collections::{HashMap, HashSet};

use csv::StringRecord;

use super::family_facts::facts;
use super::gpu_facts::memory_gib_by_name;
use super::gpu_info::per_gpu_memory_mib;
use super::{ImportError, ImportedOffering};
use crate::core::catalog::{InstanceSpec, OfferingKey};
use crate::core::money::Micros;

/// Column positions by name for one file.
struct Columns {
    index: HashMap<String, usize>,
}

/// A data row with its 1-based line number in the file.
struct Row<'a> {
    line: u64,
    record: &'a StringRecord,
    columns: &'a Columns,
}

impl Row<'_> {
    fn err(&self, column: &str, problem: impl Into<String>) -> ImportError {
        ImportError {
            line: self.line,
            column: Some(column.to_string()),
            problem: problem.into(),
        }
    }

    fn text(&self, column: &str) -> &str {
        self.columns
            .index
            .get(column)
            .and_then(|&i| self.record.get(i))
            .unwrap_or("")
            .trim()
    }

    fn number(&self, column: &str) -> Result<Option<f64>, ImportError> {
        let text = self.text(column);
        if text.is_empty() {
            return Ok(None);
        }
        let value: f64 = text
            .parse()
            .map_err(|_| self.err(column, format!("`{text}` is not a number")))?;
        if !value.is_finite() || value < 0.0 {
            return Err(self.err(column, format!("`{text}` must be a non-negative number")));
        }
        Ok(Some(value))
    }

    fn required_number(&self, column: &str) -> Result<f64, ImportError> {
        self.number(column)?
            .ok_or_else(|| self.err(column, "is empty"))
    }

    /// A price column; empty means the market is not offered. Marketplace rows (Vast) use
    /// 0.00 for "no interruptible bid", which is the same thing.
    fn price(&self, column: &str) -> Result<Option<Micros>, ImportError> {
        match self.number(column)? {
            None => Ok(None),
            Some(0.0) => Ok(None),
            Some(d) => Micros::from_dollars(d)
                .map(Some)
                .map_err(|e| self.err(column, e.to_string())),
        }
    }
}

const REQUIRED: &[&str] = &[
    "InstanceType",
    "AcceleratorName",
    "AcceleratorCount",
    "vCPUs",
    "MemoryGiB",
    "Price",
    "SpotPrice",
    "Region",
];

/// Parses a SkyPilot `vms.csv` of `provider` into accelerator offerings.
///
/// Duplicate rows for the same (region, zone, instance type) keep the first occurrence.
pub fn parse(provider: &str, text: &str) -> Result<Vec<ImportedOffering>, ImportError> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(false)
        .from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| csv_error(&e, 1))?.clone();
    let columns = Columns {
        index: headers
            .iter()
            .enumerate()
            .map(|(i, h)| (h.trim().to_string(), i))
            .collect(),
    };
    if let Some(missing) = REQUIRED.iter().find(|c| !columns.index.contains_key(**c)) {
        return Err(ImportError {
            line: 1,
            column: Some((*missing).to_string()),
            problem: "required column is missing from the header".into(),
        });
    }
    let mut records = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let line = i as u64 + 2;
        let record = record.map_err(|e| csv_error(&e, line))?;
        let line = record.position().map_or(line, |p| p.line());
        records.push((line, record));
    }
    let rows = records.iter().map(|(line, record)| Row {
        line: *line,
        record,
        columns: &columns,
    });
    let mut offerings = if provider == "gcp" {
        gcp_offerings(rows.collect())?
    } else {
        let mut out = Vec::new();
        for row in rows {
            if let Some(o) = plain_offering(provider, &row)? {
                out.push(o);
            }
        }
        out
    };
    let mut seen = HashSet::new();
    offerings.retain(|o| seen.insert(o.key.clone()));
    Ok(offerings)
}

fn csv_error(e: &csv::Error, fallback_line: u64) -> ImportError {
    ImportError {
        line: e.position().map_or(fallback_line, |p| p.line()),
        column: None,
        problem: match e.kind() {
            csv::ErrorKind::UnequalLengths {
                expected_len, len, ..
            } => {
                format!("row has {len} fields, the header has {expected_len}")
            }
            csv::ErrorKind::Utf8 { .. } => "is not valid UTF-8".into(),
            _ => format!("malformed CSV: {e}"),
        },
    }
}

/// Names that are accelerators in SkyPilot's catalogs but not trainable GPUs here.
fn is_tpu(name: &str) -> bool {
    name.starts_with("tpu-")
}

fn gpu_memory_gib(provider: &str, row: &Row<'_>, gpu: &str, count: f64) -> Option<f64> {
    let stated = per_gpu_memory_mib(row.text("GpuInfo")).map(|mib| mib / 1024.0);
    // Vast.ai's per-GPU `SizeInMiB` is the whole machine's (2× A100 says 163840 MiB).
    let stated = match (provider, stated) {
        ("vast", Some(total)) if count >= 1.0 => Some(total / count),
        (_, s) => s,
    };
    let per_gpu = stated.or_else(|| memory_gib_by_name(gpu))?;
    // A sliced GPU (Azure NVads A10 v5 at 1/6 of an A10) exposes only its share of memory.
    Some(if count < 1.0 {
        per_gpu * count
    } else {
        per_gpu
    })
}

fn plain_offering(provider: &str, row: &Row<'_>) -> Result<Option<ImportedOffering>, ImportError> {
    let gpu = row.text("AcceleratorName");
    let count = row.number("AcceleratorCount")?.unwrap_or(0.0);
    if gpu.is_empty() || count <= 0.0 || is_tpu(gpu) {
        return Ok(None);
    }
    let instance_type = row.text("InstanceType");
    if instance_type.is_empty() {
        return Err(row.err("InstanceType", "is empty"));
    }
    let region = row.text("Region");
    if region.is_empty() {
        return Err(row.err("Region", "is empty"));
    }
    let family = facts(provider, instance_type);
    let arch = match row.text("Arch") {
        "" => "x86_64",
        a => a,
    };
    Ok(Some(ImportedOffering {
        key: OfferingKey {
            provider: provider.to_string(),
            region: region.to_string(),
            zone: row.text("AvailabilityZone").to_string(),
            instance_type: instance_type.to_string(),
        },
        spec: InstanceSpec {
            gpu: gpu.to_string(),
            gpu_count: count,
            gpu_memory_gib: gpu_memory_gib(provider, row, gpu, count).unwrap_or(0.0),
            vcpus: row.required_number("vCPUs")?,
            memory_gib: row.required_number("MemoryGiB")?,
            network_gbps: family.network_gbps,
            interconnect: family.interconnect,
            local_nvme_gb: family.local_nvme_gb,
            arch: arch.to_string(),
        },
        on_demand: row.price("Price")?,
        spot: row.price("SpotPrice")?,
    }))
}

/// The host VM a GCP accelerator attaches to. A2/A3/A4/G2 hosts are fixed by the GPU; T4,
/// V100, P100 and P4 attach to general-purpose N1 VMs, for which we take n1-highmem with 8
/// vCPUs per GPU (SkyPilot's default host for one GPU is n1-highmem-8).
pub fn gcp_host(gpu: &str, count: u32) -> Option<String> {
    let host = match (gpu, count) {
        ("A100", 16) => "a2-megagpu-16g".to_string(),
        ("A100", n @ (1 | 2 | 4 | 8)) => format!("a2-highgpu-{n}g"),
        ("A100-80GB", n @ (1 | 2 | 4 | 8)) => format!("a2-ultragpu-{n}g"),
        ("H100", n @ (1 | 2 | 4 | 8)) => format!("a3-highgpu-{n}g"),
        ("H100-MEGA", 8) => "a3-megagpu-8g".to_string(),
        ("H200", 8) => "a3-ultragpu-8g".to_string(),
        ("B200", 8) => "a4-highgpu-8g".to_string(),
        ("L4", 1) => "g2-standard-4".to_string(),
        ("L4", 2) => "g2-standard-24".to_string(),
        ("L4", 4) => "g2-standard-48".to_string(),
        ("L4", 8) => "g2-standard-96".to_string(),
        ("T4" | "V100" | "P100" | "P4", n @ (1 | 2 | 4 | 8)) => format!("n1-highmem-{}", 8 * n),
        _ => return None,
    };
    Some(host)
}

/// A host VM row's figures in one zone.
struct Host {
    vcpus: f64,
    memory_gib: f64,
    on_demand: Option<Micros>,
    spot: Option<Micros>,
}

fn gcp_offerings(rows: Vec<Row<'_>>) -> Result<Vec<ImportedOffering>, ImportError> {
    let mut hosts: HashMap<(&str, &str), Host> = HashMap::new();
    for row in rows.iter().filter(|r| !r.text("InstanceType").is_empty()) {
        hosts.insert(
            (row.text("InstanceType"), row.text("AvailabilityZone")),
            Host {
                vcpus: row.required_number("vCPUs")?,
                memory_gib: row.required_number("MemoryGiB")?,
                on_demand: row.price("Price")?,
                spot: row.price("SpotPrice")?,
            },
        );
    }
    let mut out = Vec::new();
    for row in rows.iter().filter(|r| r.text("InstanceType").is_empty()) {
        let gpu = row.text("AcceleratorName");
        let count = row.number("AcceleratorCount")?.unwrap_or(0.0);
        if gpu.is_empty() || is_tpu(gpu) || count < 1.0 || count.fract() != 0.0 {
            continue;
        }
        let Some(host_type) = gcp_host(gpu, count as u32) else {
            continue;
        };
        let zone = row.text("AvailabilityZone");
        let Some(host) = hosts.get(&(host_type.as_str(), zone)) else {
            continue;
        };
        // N1 hosts take any of several GPUs, so the GPU is part of the offering's name.
        let instance_type = if host_type.starts_with("n1-") {
            format!("{host_type}+{gpu}x{}", count as u32)
        } else {
            host_type.clone()
        };
        // SkyPilot names A3 Mega's GPU `H100-MEGA`; it is an H100 SXM on a faster fabric.
        let gpu_name = if gpu == "H100-MEGA" { "H100" } else { gpu };
        let family = facts("gcp", &instance_type);
        let sum = |gpu_price: Option<Micros>, host_price: Option<Micros>| {
            Some(Micros(gpu_price?.0 + host_price?.0))
        };
        out.push(ImportedOffering {
            key: OfferingKey {
                provider: "gcp".into(),
                region: row.text("Region").to_string(),
                zone: zone.to_string(),
                instance_type,
            },
            spec: InstanceSpec {
                gpu: gpu_name.to_string(),
                gpu_count: count,
                gpu_memory_gib: gpu_memory_gib("gcp", row, gpu, count).unwrap_or(0.0),
                vcpus: host.vcpus,
                memory_gib: host.memory_gib,
                network_gbps: family.network_gbps,
                interconnect: family.interconnect,
                local_nvme_gb: family.local_nvme_gb,
                arch: "x86_64".into(),
            },
            on_demand: sum(row.price("Price")?, host.on_demand),
            spot: sum(row.price("SpotPrice")?, host.spot),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const AWS_HEADER: &str = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch";

    #[test]
    fn gcp_offering_is_host_plus_accelerator_in_the_same_zone() {
        let csv = "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice\n\
a2-highgpu-8g,96.0,680.0,,,,europe-west4,europe-west4-a,6.51251,2.67308\n\
,,,A100,8,{'Gpus': [{'MemoryInfo': {'SizeInMiB': 40960}}]},europe-west4,europe-west4-a,12.90919,9.8208\n\
,,,A100,8,{'Gpus': [{'MemoryInfo': {'SizeInMiB': 40960}}]},europe-west4,europe-west4-b,12.90919,9.8208\n";
        let offerings = parse("gcp", csv).unwrap();
        // Zone b has no host row, so no offering there.
        assert_eq!(offerings.len(), 1);
        let o = &offerings[0];
        assert_eq!(o.key.instance_type, "a2-highgpu-8g");
        assert_eq!(o.on_demand, Some(Micros(19_421_700)));
        assert_eq!(o.spot, Some(Micros(12_493_880)));
        assert_eq!(
            (o.spec.gpu_count, o.spec.gpu_memory_gib, o.spec.vcpus),
            (8.0, 40.0, 96.0)
        );
    }

    #[test]
    fn aws_rows_keep_zone_prices_and_fill_family_facts() {
        let csv = format!(
            "{AWS_HEADER}\np4d.24xlarge,A100,8.0,96.0,1152.0,\"{{'Gpus': [{{'Name': 'A100', 'MemoryInfo': {{'SizeInMiB': 40960}}}}]}}\",21.95764,2.4655,us-east-1,use1-az1,x86_64\n"
        );
        let o = &parse("aws", &csv).unwrap()[0];
        assert_eq!(o.key.zone, "use1-az1");
        assert_eq!(o.on_demand, Some(Micros(21_957_640)));
        assert_eq!(o.spot, Some(Micros(2_465_500)));
        assert_eq!(o.spec.interconnect, crate::core::catalog::Interconnect::Efa);
        assert_eq!(o.spec.local_nvme_gb, Some(8000.0));
    }

    #[test]
    fn a_bad_price_names_its_line_and_column() {
        let csv = format!(
            "{AWS_HEADER}\ng5.xlarge,A10G,1,4,16,,1.006,,us-east-1,,x86_64\ng5.2xlarge,A10G,1,8,32,,abc,,us-east-1,,x86_64\n"
        );
        let err = parse("aws", &csv).unwrap_err();
        assert_eq!((err.line, err.column.as_deref()), (3, Some("Price")));
        let csv = format!("{AWS_HEADER}\ng5.xlarge,A10G,1,4,16,,-1,,us-east-1,,x86_64\n");
        assert_eq!(parse("aws", &csv).unwrap_err().line, 2);
    }

    #[test]
    fn a_ragged_row_names_its_line() {
        let csv = format!(
            "{AWS_HEADER}\ng5.xlarge,A10G,1,4,16,,1.006,,us-east-1,,x86_64\ng5.xlarge,A10G\n"
        );
        let err = parse("aws", &csv).unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.problem.contains("fields"), "{}", err.problem);
    }

    #[test]
    fn a_missing_column_is_reported_on_the_header_line() {
        let err = parse("aws", "InstanceType,Price\nx,1\n").unwrap_err();
        assert_eq!(
            (err.line, err.column.as_deref()),
            (1, Some("AcceleratorName"))
        );
    }

    #[test]
    fn vast_zero_spot_means_no_spot_offer() {
        let csv = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region\n\
1x-RTX_5090,RTX5090,1,32,64.0,\"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 32607}}]}\",0.44,0.00,\"Denmark, DK, EU\"\n";
        let o = &parse("vast", csv).unwrap()[0];
        assert_eq!((o.on_demand, o.spot), (Some(Micros(440_000)), None));
        assert_eq!(o.key.region, "Denmark, DK, EU");
    }

    #[test]
    fn vast_states_the_machine_total_as_gpu_memory() {
        let csv = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region\n\
2x-A100_SXM4,A100,2,32,64.0,\"{'Gpus': [{'Name': 'A100', 'Count': 2, 'MemoryInfo': {'SizeInMiB': 163840}}], 'TotalGpuMemoryInMiB': 163840}\",1.87,0.00,\"Montana, US, NA\"\n";
        assert_eq!(parse("vast", csv).unwrap()[0].spec.gpu_memory_gib, 80.0);
        // Lambda's per-GPU figure is per GPU although its total repeats it.
        let lambda = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n\
gpu_8x_h100_sxm5,H100,8.0,208.0,1800.0,31.92,europe-central-1,\"{'Gpus': [{'Name': 'H100', 'Count': 8.0, 'MemoryInfo': {'SizeInMiB': 81920}}], 'TotalGpuMemoryInMiB': 81920}\",\n";
        assert_eq!(
            parse("lambda", lambda).unwrap()[0].spec.gpu_memory_gib,
            80.0
        );
    }
}
