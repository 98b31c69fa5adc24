//! A managed instance group's path as a pool names it, zonal
//! `projects/P/zones/Z/instanceGroupManagers/NAME` or regional
//! `projects/P/regions/R/instanceGroupManagers/NAME`, and the Compute API paths built from it.
//! Parsed once, so a malformed path is a 422 when the policy is stored, not a failed call later.

use std::fmt;

/// Where a MIG lives: one zone, or a region it spreads over.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    Zone(String),
    Region(String),
}

/// A parsed MIG path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MigPath {
    pub project: String,
    pub location: Location,
    pub name: String,
}

impl MigPath {
    /// Reads `projects/P/zones/Z/instanceGroupManagers/NAME` or the `regions/R` form; the
    /// error says what is wrong, for the policy's 422.
    pub fn parse(text: &str) -> Result<Self, String> {
        const FORM: &str = "must be projects/PROJECT/zones/ZONE/instanceGroupManagers/NAME \
                            or projects/PROJECT/regions/REGION/instanceGroupManagers/NAME";
        let parts: Vec<&str> = text.split('/').collect();
        let [
            "projects",
            project,
            scope,
            location,
            "instanceGroupManagers",
            name,
        ] = parts.as_slice()
        else {
            return Err(FORM.to_string());
        };
        if !is_project_id(project) {
            return Err(format!(
                "names a project `{project}` that is not a project id"
            ));
        }
        let location = match *scope {
            "zones" if is_zone(location) => Location::Zone(location.to_string()),
            "regions" if is_region(location) => Location::Region(location.to_string()),
            "zones" => return Err(format!("names a zone `{location}` that is not a zone")),
            "regions" => return Err(format!("names a region `{location}` that is not a region")),
            _ => return Err(FORM.to_string()),
        };
        if !is_resource_name(name) {
            return Err(format!(
                "names a group `{name}`: lowercase letters, digits and `-`, 1 to 63, starting \
                 with a letter"
            ));
        }
        Ok(Self {
            project: project.to_string(),
            location,
            name: name.to_string(),
        })
    }

    /// The region the group is in (a zone's region is its name without the last `-x`).
    pub fn region(&self) -> &str {
        match &self.location {
            Location::Zone(z) => region_of_zone(z),
            Location::Region(r) => r,
        }
    }

    /// The zone of a zonal group.
    pub fn zone(&self) -> Option<&str> {
        match &self.location {
            Location::Zone(z) => Some(z),
            Location::Region(_) => None,
        }
    }

    /// `zones/Z` or `regions/R`.
    fn scope(&self) -> String {
        match &self.location {
            Location::Zone(z) => format!("zones/{z}"),
            Location::Region(r) => format!("regions/{r}"),
        }
    }

    /// The group itself, under `/compute/v1/`.
    pub fn api_path(&self) -> String {
        format!(
            "projects/{}/{}/instanceGroupManagers/{}",
            self.project,
            self.scope(),
            self.name
        )
    }

    /// One of the group's methods (`resize`, `listManagedInstances`, ...).
    pub fn method_path(&self, method: &str) -> String {
        format!("{}/{method}", self.api_path())
    }

    /// `zoneOperations.wait` or `regionOperations.wait` of an operation on this group.
    pub fn operation_wait_path(&self, operation: &str) -> String {
        format!(
            "projects/{}/{}/operations/{operation}/wait",
            self.project,
            self.scope()
        )
    }
}

impl fmt::Display for MigPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.api_path())
    }
}

/// `us-central1-a` → `us-central1`.
pub fn region_of_zone(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(region, _)| region)
}

/// Project ids are 6 to 30 lowercase letters, digits and hyphens; older domain-scoped ones
/// carry `example.com:` in front.
fn is_project_id(p: &str) -> bool {
    let id = p.rsplit_once(':').map_or(p, |(_, id)| id);
    (6..=30).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// RFC 1035 labels, as Compute Engine names resources.
fn is_resource_name(n: &str) -> bool {
    (1..=63).contains(&n.len())
        && n.starts_with(|c: char| c.is_ascii_lowercase())
        && !n.ends_with('-')
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// `us-central1`, `europe-west4`, `northamerica-northeast1`: words then a number.
pub fn is_region(r: &str) -> bool {
    let Some((area, place)) = r.split_once('-') else {
        return false;
    };
    let digits = place.trim_start_matches(|c: char| c.is_ascii_lowercase());
    !area.is_empty()
        && area.bytes().all(|b| b.is_ascii_lowercase())
        && digits.len() < place.len()
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A region and a one-letter zone: `us-central1-a`.
pub fn is_zone(z: &str) -> bool {
    match z.rsplit_once('-') {
        Some((region, letter)) => {
            is_region(region) && letter.len() == 1 && letter.bytes().all(|b| b.is_ascii_lowercase())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zonal_and_regional_paths_parse_into_their_api_paths() {
        let z = MigPath::parse(
            "projects/my-project/zones/us-central1-a/instanceGroupManagers/trainers",
        )
        .unwrap();
        assert_eq!(z.zone(), Some("us-central1-a"));
        assert_eq!(z.region(), "us-central1");
        assert_eq!(
            z.method_path("resize"),
            "projects/my-project/zones/us-central1-a/instanceGroupManagers/trainers/resize"
        );
        assert_eq!(
            z.operation_wait_path("operation-1"),
            "projects/my-project/zones/us-central1-a/operations/operation-1/wait"
        );
        let r = MigPath::parse(
            "projects/my-project/regions/europe-west4/instanceGroupManagers/trainers-spot",
        )
        .unwrap();
        assert_eq!((r.zone(), r.region()), (None, "europe-west4"));
        assert_eq!(
            r.operation_wait_path("op"),
            "projects/my-project/regions/europe-west4/operations/op/wait"
        );
    }

    #[test]
    fn malformed_paths_say_what_is_wrong() {
        for bad in [
            "trainers",
            "projects/my-project/zones/us-central1-a/instanceGroups/trainers",
            "projects/my-project/zones/us-central1-a/instanceGroupManagers/trainers/extra",
            "https://www.googleapis.com/compute/v1/projects/my-project/zones/us-central1-a/instanceGroupManagers/t",
        ] {
            assert!(
                MigPath::parse(bad).unwrap_err().contains("must be"),
                "{bad}"
            );
        }
        let e = MigPath::parse("projects/My_Project/zones/us-central1-a/instanceGroupManagers/t")
            .unwrap_err();
        assert!(e.contains("project"), "{e}");
        let e = MigPath::parse("projects/my-project/zones/us-central1/instanceGroupManagers/t")
            .unwrap_err();
        assert!(e.contains("zone"), "{e}");
        let e = MigPath::parse("projects/my-project/regions/us-central1-a/instanceGroupManagers/t")
            .unwrap_err();
        assert!(e.contains("region"), "{e}");
        let e = MigPath::parse("projects/my-project/zones/us-central1-a/instanceGroupManagers/Tr")
            .unwrap_err();
        assert!(e.contains("group"), "{e}");
    }

    #[test]
    fn zone_and_region_shapes() {
        assert!(is_zone("northamerica-northeast1-b"));
        assert!(is_region("me-central2"));
        assert!(!is_region("us-central"));
        assert!(!is_zone("us-central1-ab"));
        assert_eq!(region_of_zone("asia-southeast1-c"), "asia-southeast1");
    }
}
