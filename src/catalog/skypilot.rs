//! The SkyPilot catalog layout (`vms.csv`): one row per instance type and region or zone,
//! columns read by header name because their order differs per cloud.
//!
//! Only accelerator offerings are kept. GCP is special: a GPU offering is a host VM row plus
//! an accelerator row in the same zone, chosen and priced as SkyPilot does (see
//! [`gcp_offerings`]).

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
    /// 0.00 for "no interruptible bid", which is the same thing. (GCP's rows are read by
    /// [`gcp_price`]: there 0.0 is a price.)
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

/// The host VMs a GCP accelerator attaches to, as SkyPilot chooses them
/// (`sky/catalog/gcp_catalog.py`): A100, L4, H100, H200 and B200 come in fixed machine types
/// (the cheapest of the listed ones in the zone is taken); the others (T4, V100, P100, P4,
/// K80) attach to a general-purpose N1 VM with at least SkyPilot's vCPUs for that GPU count
/// and four GiB of memory per vCPU.
pub(crate) enum GcpHost {
    Fixed(&'static [&'static str]),
    N1 { vcpus: f64 },
}

pub(crate) fn gcp_host(gpu: &str, count: u32) -> Option<GcpHost> {
    use GcpHost::{Fixed, N1};
    Some(match (gpu, count) {
        ("A100", 1) => Fixed(&["a2-highgpu-1g"]),
        ("A100", 2) => Fixed(&["a2-highgpu-2g"]),
        ("A100", 4) => Fixed(&["a2-highgpu-4g"]),
        ("A100", 8) => Fixed(&["a2-highgpu-8g"]),
        ("A100", 16) => Fixed(&["a2-megagpu-16g"]),
        ("A100-80GB", 1) => Fixed(&["a2-ultragpu-1g"]),
        ("A100-80GB", 2) => Fixed(&["a2-ultragpu-2g"]),
        ("A100-80GB", 4) => Fixed(&["a2-ultragpu-4g"]),
        ("A100-80GB", 8) => Fixed(&["a2-ultragpu-8g"]),
        ("L4", 1) => Fixed(&[
            "g2-standard-4",
            "g2-standard-8",
            "g2-standard-12",
            "g2-standard-16",
            "g2-standard-32",
        ]),
        ("L4", 2) => Fixed(&["g2-standard-24"]),
        ("L4", 4) => Fixed(&["g2-standard-48"]),
        ("L4", 8) => Fixed(&["g2-standard-96"]),
        ("H100", 1) => Fixed(&["a3-highgpu-1g"]),
        ("H100", 2) => Fixed(&["a3-highgpu-2g"]),
        ("H100", 4) => Fixed(&["a3-highgpu-4g"]),
        ("H100", 8) => Fixed(&["a3-highgpu-8g"]),
        ("H100-MEGA", 8) => Fixed(&["a3-megagpu-8g"]),
        ("H200", 8) => Fixed(&["a3-ultragpu-8g"]),
        ("B200", 8) => Fixed(&["a4-highgpu-8g"]),
        ("A100" | "A100-80GB" | "L4" | "H100" | "H100-MEGA" | "H200" | "B200", _) => return None,
        ("K80", n @ (1 | 2 | 4 | 8 | 16)) => N1 {
            vcpus: f64::from(4 * n),
        },
        ("T4", 1) => N1 { vcpus: 4.0 },
        ("T4", 2) => N1 { vcpus: 8.0 },
        ("T4", 4) => N1 { vcpus: 48.0 },
        ("T4", _) => return None,
        (_, n @ (1 | 2 | 4 | 8)) => N1 {
            vcpus: f64::from(8 * n),
        },
        (_, 16) => N1 { vcpus: 128.0 },
        _ => return None,
    })
}

/// The N1 families SkyPilot attaches GPUs to.
pub(crate) const N1_FAMILIES: [&str; 3] = ["n1-standard-", "n1-highmem-", "n1-highcpu-"];
/// SkyPilot asks N1 hosts for at least this much memory per vCPU, GiB.
pub(crate) const N1_MEMORY_PER_VCPU: f64 = 4.0;

/// A host VM row's figures in one zone.
struct Host<'a> {
    instance_type: &'a str,
    vcpus: f64,
    memory_gib: f64,
    /// `None` where the row leaves the price empty (not offered).
    on_demand: Option<Micros>,
    spot: Option<Micros>,
}

impl Host<'_> {
    fn fits(&self, host: &GcpHost) -> bool {
        match host {
            GcpHost::Fixed(types) => types.contains(&self.instance_type),
            GcpHost::N1 { vcpus } => {
                N1_FAMILIES
                    .iter()
                    .any(|f| self.instance_type.starts_with(f))
                    && self.vcpus >= *vcpus
                    && self.memory_gib >= vcpus * N1_MEMORY_PER_VCPU
            }
        }
    }
}

/// A GCP price column: empty is "not offered"; any number, 0.0 included, is a price. The
/// A4 (B200) host rows carry 0.0 because the accelerator row holds the whole price.
fn gcp_price(row: &Row<'_>, column: &str) -> Result<Option<Micros>, ImportError> {
    match row.number(column)? {
        None => Ok(None),
        Some(0.0) => Ok(Some(Micros(0))),
        Some(d) => Micros::from_dollars(d)
            .map(Some)
            .map_err(|e| row.err(column, e.to_string())),
    }
}

/// GCP offerings priced as SkyPilot prices them from the same file: an accelerator row plus
/// its cheapest host row in the same zone, on-demand and spot each the sum of the two (no
/// spot when either is empty).
fn gcp_offerings(rows: Vec<Row<'_>>) -> Result<Vec<ImportedOffering>, ImportError> {
    // Host rows by zone, in file order (the first of equally cheap hosts wins, as in SkyPilot).
    let mut hosts: HashMap<(&str, &str), Vec<Host<'_>>> = HashMap::new();
    for row in rows.iter().filter(|r| !r.text("InstanceType").is_empty()) {
        hosts
            .entry((row.text("Region"), row.text("AvailabilityZone")))
            .or_default()
            .push(Host {
                instance_type: row.text("InstanceType"),
                vcpus: row.required_number("vCPUs")?,
                memory_gib: row.required_number("MemoryGiB")?,
                on_demand: gcp_price(row, "Price")?,
                spot: gcp_price(row, "SpotPrice")?,
            });
    }
    let mut out = Vec::new();
    for row in rows.iter().filter(|r| r.text("InstanceType").is_empty()) {
        let gpu = row.text("AcceleratorName");
        let count = row.number("AcceleratorCount")?.unwrap_or(0.0);
        if gpu.is_empty() || is_tpu(gpu) || count < 1.0 || count.fract() != 0.0 {
            continue;
        }
        let Some(wanted) = gcp_host(gpu, count as u32) else {
            continue;
        };
        let Some(gpu_price) = gcp_price(row, "Price")? else {
            continue;
        };
        let zone = row.text("AvailabilityZone");
        let host = hosts
            .get(&(row.text("Region"), zone))
            .into_iter()
            .flatten()
            .filter(|h| h.fits(&wanted))
            .filter_map(|h| h.on_demand.map(|p| (p, h)))
            .min_by_key(|(p, _)| *p)
            .map(|(_, h)| h);
        let Some(host) = host else {
            continue;
        };
        let on_demand = host
            .on_demand
            .map(|h| Micros(h.0 + gpu_price.0))
            .filter(|p| p.0 > 0);
        let spot = match (gcp_price(row, "SpotPrice")?, host.spot) {
            (Some(g), Some(h)) => Some(Micros(g.0 + h.0)).filter(|p| p.0 > 0),
            _ => None,
        };
        // N1 hosts take any of several GPUs, so the GPU is part of the offering's name.
        let instance_type = if matches!(wanted, GcpHost::N1 { .. }) {
            format!("{}+{gpu}x{}", host.instance_type, count as u32)
        } else {
            host.instance_type.to_string()
        };
        // SkyPilot names A3 Mega's GPU `H100-MEGA`; it is an H100 SXM on a faster fabric.
        let gpu_name = if gpu == "H100-MEGA" { "H100" } else { gpu };
        let family = facts("gcp", &instance_type);
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
            on_demand,
            spot,
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

    const GCP_HEADER: &str = "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice";

    #[test]
    fn a_b200_host_priced_at_zero_adds_nothing_to_its_accelerators() {
        // The bundled catalog's rows for asia-northeast1-b: the A4 host carries 0.0, the
        // accelerator row the whole price. SkyPilot adds the two: $64.44/h, spot $41.0848.
        let csv = format!(
            "{GCP_HEADER}\n\
a4-highgpu-8g,224.0,3968.0,,,,asia-northeast1,asia-northeast1-b,0.0,0.0\n\
,,,B200,8,{{'Gpus': [{{'MemoryInfo': {{'SizeInMiB': 184320}}}}]}},asia-northeast1,asia-northeast1-b,64.44,41.0848\n"
        );
        let offerings = parse("gcp", &csv).unwrap();
        assert_eq!(offerings.len(), 1);
        let o = &offerings[0];
        assert_eq!(o.key.instance_type, "a4-highgpu-8g");
        assert_eq!(
            (o.on_demand, o.spot),
            (Some(Micros(64_440_000)), Some(Micros(41_084_800)))
        );
        assert_eq!((o.spec.gpu_count, o.spec.gpu_memory_gib), (8.0, 180.0));
    }

    #[test]
    fn n1_gpus_take_the_cheapest_n1_host_with_skypilots_vcpus_and_memory() {
        // us-central1-a rows of the bundled catalog. One T4 wants 4 vCPUs and 16 GiB:
        // n1-standard-4 has 15 GiB, so n1-highmem-4 ($0.23661) beats n1-standard-8 ($0.38).
        // Four T4s want 48 vCPUs and 192 GiB: n1-standard-64 (240 GiB, $3.03998) beats
        // n1-highmem-64 ($3.7857); n1-highcpu-64 has 57.6 GiB.
        let csv = format!(
            "{GCP_HEADER}\n\
n1-standard-4,4.0,15.0,,,,us-central1,us-central1-a,0.19,0.06977\n\
n1-highmem-4,4.0,26.0,,,,us-central1,us-central1-a,0.23661,0.08638\n\
n1-standard-8,8.0,30.0,,,,us-central1,us-central1-a,0.38,0.13954\n\
n1-highcpu-64,64.0,57.599609375,,,,us-central1,us-central1-a,2.26715,0.8409\n\
n1-standard-64,64.0,240.0,,,,us-central1,us-central1-a,3.03998,1.11632\n\
n1-highmem-64,64.0,416.0,,,,us-central1,us-central1-a,3.7857,1.38208\n\
,,,T4,1,{{'Gpus': [{{'MemoryInfo': {{'SizeInMiB': 16384}}}}]}},us-central1,us-central1-a,0.35,0.1654\n\
,,,T4,4,{{'Gpus': [{{'MemoryInfo': {{'SizeInMiB': 16384}}}}]}},us-central1,us-central1-a,1.4,0.6616\n\
,,,T4,8,{{'Gpus': [{{'MemoryInfo': {{'SizeInMiB': 16384}}}}]}},us-central1,us-central1-a,2.8,1.3232\n"
        );
        let offerings = parse("gcp", &csv).unwrap();
        let names: Vec<&str> = offerings
            .iter()
            .map(|o| o.key.instance_type.as_str())
            .collect();
        // SkyPilot has no host for eight T4s.
        assert_eq!(names, vec!["n1-highmem-4+T4x1", "n1-standard-64+T4x4"]);
        assert_eq!(offerings[0].on_demand, Some(Micros(586_610)));
        assert_eq!(offerings[0].spot, Some(Micros(251_780)));
        assert_eq!(offerings[1].on_demand, Some(Micros(4_439_980)));
        assert_eq!(offerings[1].spot, Some(Micros(1_777_920)));
        assert_eq!(
            (offerings[1].spec.vcpus, offerings[1].spec.memory_gib),
            (64.0, 240.0)
        );
    }

    #[test]
    fn an_empty_gcp_price_is_not_offered_in_that_market() {
        let csv = format!(
            "{GCP_HEADER}\n\
a3-megagpu-8g,208.0,1872.0,,,,us-central1,us-central1-a,35.39149,\n\
,,,H100-MEGA,8,{{'Gpus': [{{'MemoryInfo': {{'SizeInMiB': 81920}}}}]}},us-central1,us-central1-a,50.0,20.0\n"
        );
        let o = &parse("gcp", &csv).unwrap()[0];
        assert_eq!(o.spec.gpu, "H100");
        assert_eq!((o.on_demand, o.spot), (Some(Micros(85_391_490)), None));
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
