//! What renting an instance costs beyond its hourly price: how long it takes to start (boot,
//! GPU driver, image pull), which is paid for, and how the provider turns run time into a
//! bill (an increment the time is rounded up to, and a minimum). Both instance selection and
//! the simulator use these.

/// Minutes from a launch request to a node that trains, by provider, when the job does not
/// say. These are assumptions, stated in every answer: a GPU VM boots in one to three
/// minutes, and pulling and unpacking a training image of ten or more gigabytes takes
/// another two to five. Marketplace hosts (Vast) download over links of very uneven speed.
pub fn default_startup_min(provider: &str) -> f64 {
    match provider {
        "aws" | "gcp" => 4.0,
        "azure" | "lambda" | "nebius" | "alibaba" => 5.0,
        "vast" => 8.0,
        _ => 5.0,
    }
}

/// A provider's default start-up and its billing, which a catalog snapshot looks up once per
/// shape rather than by the provider's name for every selection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Terms {
    pub billing: Billing,
    pub default_startup_min: f64,
}

impl Terms {
    pub fn for_provider(provider: &str) -> Self {
        Self {
            billing: Billing::for_provider(provider),
            default_startup_min: default_startup_min(provider),
        }
    }
}

/// How a provider turns run time into a bill.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Billing {
    /// Run time is rounded up to a whole number of these.
    pub increment_ms: i64,
    /// A started instance is billed at least this long.
    pub minimum_ms: i64,
}

impl Billing {
    /// What each provider of the bundled catalog documents for Linux GPU instances; others
    /// bill by the second without a minimum.
    pub fn for_provider(provider: &str) -> Self {
        let (increment_s, minimum_s) = match provider {
            // EC2 per-second billing with a 60-second minimum; GCE the same.
            "aws" | "gcp" => (1, 60),
            // Lambda Cloud bills in one-minute increments.
            "lambda" => (60, 60),
            // Azure, Alibaba pay-as-you-go, Nebius and Vast bill by the second.
            _ => (1, 0),
        };
        Self {
            increment_ms: increment_s * 1000,
            minimum_ms: minimum_s * 1000,
        }
    }

    /// Milliseconds billed for `ran_ms` of run time.
    pub fn billed_ms(&self, ran_ms: i64) -> i64 {
        let inc = self.increment_ms.max(1);
        let rounded = (ran_ms.max(0) + inc - 1) / inc * inc;
        rounded.max(self.minimum_ms)
    }

    /// Hours billed for `hours` of run time. Rounded in whole milliseconds first, so a
    /// figure that is already a whole number of increments is billed as it is.
    pub fn billed_hours(&self, hours: f64) -> f64 {
        let ms = (hours * 3_600_000.0).round();
        // Beyond ~290 million years the estimate is meaningless anyway; keep it finite.
        let ms = if ms.is_finite() && ms < 9.0e18 {
            ms as i64
        } else {
            return hours;
        };
        self.billed_ms(ms) as f64 / 3_600_000.0
    }

    pub fn increment_sec(&self) -> f64 {
        self.increment_ms as f64 / 1000.0
    }

    pub fn minimum_sec(&self) -> f64 {
        self.minimum_ms as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn billing_rounds_up_and_has_a_minimum() {
        let aws = Billing::for_provider("aws");
        assert_eq!(aws.billed_ms(30_000), 60_000, "one-minute minimum");
        assert_eq!(aws.billed_ms(90_400), 91_000, "whole seconds, rounded up");
        let lambda = Billing::for_provider("lambda");
        assert_eq!(lambda.billed_ms(61_000), 120_000);
        assert_eq!(Billing::for_provider("azure").billed_ms(500), 1000);
    }

    #[test]
    fn billed_hours_round_the_same_way() {
        let lambda = Billing::for_provider("lambda");
        // 61 minutes on Lambda is billed as 62.
        assert_eq!(lambda.billed_hours(61.5 / 60.0), 62.0 / 60.0);
        // Three minutes on AWS: above the minimum, already whole seconds.
        assert_eq!(Billing::for_provider("aws").billed_hours(0.05), 0.05);
        assert_eq!(
            Billing::for_provider("aws").billed_hours(0.01),
            60.0 / 3600.0
        );
    }

    #[test]
    fn every_bundled_provider_has_a_start_up() {
        for p in ["aws", "gcp", "azure", "lambda", "nebius", "vast", "alibaba"] {
            assert!(default_startup_min(p) >= 4.0, "{p}");
        }
    }
}
