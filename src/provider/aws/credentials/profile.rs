//! The shared config and credentials files (`~/.aws/config`, `~/.aws/credentials`): their
//! simple INI dialect and how a profile becomes a credential [`Source`].
//!
//! In the config file a profile's section is `[profile NAME]` (`[default]` for the default);
//! in the credentials file it is `[NAME]`. Where both set a key, the credentials file wins.
//! Supported in a profile: static keys, `role_arn` with `source_profile` (chains allowed),
//! `credential_source` (`Environment`, `Ec2InstanceMetadata`, `EcsContainer`) or
//! `web_identity_token_file`. SSO and `credential_process` profiles are refused by name.

use std::collections::HashMap;
use std::path::PathBuf;

use super::source::Source;
use crate::provider::aws::settings::AwsCredentials;
use crate::provider::secret::Secret;

/// Every profile's keys (lower case), merged from both files.
#[derive(Debug, Default, Clone)]
pub struct Profiles(HashMap<String, HashMap<String, String>>);

/// Sections and their `key = value` pairs. Comment lines start with `#` or `;`; indented
/// lines after a key are its sub-properties (e.g. `s3 =` settings), which we do not need.
fn parse_ini(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut sections: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            sections.push((name.trim().to_string(), Vec::new()));
            continue;
        }
        if raw.starts_with([' ', '\t']) {
            continue;
        }
        let (Some((_, pairs)), Some((key, value))) = (sections.last_mut(), line.split_once('='))
        else {
            continue;
        };
        // An inline comment needs whitespace before it, so `#` inside a value survives.
        let value = [" #", "\t#", " ;", "\t;"]
            .iter()
            .filter_map(|c| value.find(c))
            .min()
            .map_or(value, |at| &value[..at]);
        pairs.push((key.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    sections
}

impl Profiles {
    pub fn parse(config: Option<&str>, credentials: Option<&str>) -> Self {
        let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
        for (section, pairs) in config.map(parse_ini).unwrap_or_default() {
            let name = match section.strip_prefix("profile ") {
                Some(n) => n.trim().to_string(),
                None if section == "default" => section,
                // `sso-session`, `services` and the like are not profiles.
                None => continue,
            };
            out.entry(name).or_default().extend(pairs);
        }
        for (name, pairs) in credentials.map(parse_ini).unwrap_or_default() {
            out.entry(name).or_default().extend(pairs);
        }
        Self(out)
    }

    pub fn get(&self, profile: &str, key: &str) -> Option<&str> {
        self.0
            .get(profile)?
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub fn contains(&self, profile: &str) -> bool {
        self.0.contains_key(profile)
    }

    /// The credential source `profile` describes: `Ok(None)` when it has no credentials (it
    /// may hold only a region), an error when it is malformed or needs what we do not support.
    /// `credential_source` turns that key's value into a source.
    pub fn source(
        &self,
        profile: &str,
        session_name: &str,
        credential_source: &dyn Fn(&str) -> Result<Source, String>,
    ) -> Result<Option<Source>, String> {
        self.source_in_chain(profile, session_name, credential_source, &mut Vec::new())
    }

    fn source_in_chain(
        &self,
        profile: &str,
        session_name: &str,
        credential_source: &dyn Fn(&str) -> Result<Source, String>,
        seen: &mut Vec<String>,
    ) -> Result<Option<Source>, String> {
        if !self.contains(profile) {
            return Ok(None);
        }
        let get = |key: &str| self.get(profile, key).map(str::to_string);
        for unsupported in ["credential_process", "sso_start_url", "sso_session"] {
            if get(unsupported).is_some() && get("aws_access_key_id").is_none() {
                return Err(format!(
                    "profile {profile} uses `{unsupported}`, which trainscaler does not support; \
                     use static keys, role_arn, web identity or an instance or container role"
                ));
            }
        }
        let keys = || {
            get("aws_access_key_id").map(|id| {
                Ok(Source::Static {
                    credentials: AwsCredentials {
                        access_key_id: id,
                        secret_access_key: Secret::new(get("aws_secret_access_key").ok_or_else(
                            || format!("profile {profile} has aws_access_key_id but no aws_secret_access_key"),
                        )?),
                        session_token: get("aws_session_token").map(Secret::new),
                    },
                    origin: "profile",
                    profile: Some(profile.to_string()),
                })
            })
        };
        let Some(role_arn) = get("role_arn") else {
            return keys().transpose();
        };
        let session_name = get("role_session_name").unwrap_or_else(|| session_name.to_string());
        if let Some(file) = get("web_identity_token_file") {
            return Ok(Some(Source::WebIdentity {
                role_arn,
                session_name,
                token_file: PathBuf::from(file),
            }));
        }
        seen.push(profile.to_string());
        let base = match (get("source_profile"), get("credential_source")) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "profile {profile} sets both source_profile and credential_source"
                ));
            }
            // A profile may name itself to use its own keys for the role.
            (Some(src), None) if src == profile => keys().transpose()?.ok_or_else(|| {
                format!("profile {profile} is its own source_profile but has no keys")
            })?,
            (Some(src), None) if seen.contains(&src) => {
                return Err(format!(
                    "profiles form a loop through source_profile: {} -> {src}",
                    seen.join(" -> ")
                ));
            }
            (Some(src), None) => self
                .source_in_chain(&src, session_name.as_str(), credential_source, seen)?
                .ok_or_else(|| {
                    format!("profile {profile}'s source_profile {src} has no credentials")
                })?,
            (None, Some(named)) => credential_source(&named)?,
            (None, None) => {
                return Err(format!(
                    "profile {profile} sets role_arn without source_profile, credential_source \
                     or web_identity_token_file"
                ));
            }
        };
        Ok(Some(Source::AssumeRole {
            role_arn,
            session_name,
            external_id: get("external_id"),
            base: Box::new(base),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_named(name: &str) -> Result<Source, String> {
        Err(format!("unexpected credential_source {name}"))
    }

    const CONFIG: &str = "\
# a comment
[default]
region = eu-west-1

[profile dev]
role_arn = arn:aws:iam::123456789012:role/dev
source_profile = base
external_id = ext-1 ; inline comment

[profile base]
aws_access_key_id = AKIDCONFIG
aws_secret_access_key = from-config
s3 =
  max_concurrent_requests = 20

[profile loop-a]
role_arn = arn:aws:iam::1:role/a
source_profile = loop-b

[profile loop-b]
role_arn = arn:aws:iam::1:role/b
source_profile = loop-a

[profile ci]
role_arn = arn:aws:iam::1:role/ci
credential_source = Environment

[sso-session corp]
sso_start_url = https://example.awsapps.com/start
";

    const CREDENTIALS: &str = "\
[base]
aws_access_key_id = AKIDCREDS
aws_secret_access_key = from-credentials#not-a-comment
aws_session_token = tok
";

    #[test]
    fn the_credentials_file_wins_over_the_config_file_for_the_same_profile() {
        let p = Profiles::parse(Some(CONFIG), Some(CREDENTIALS));
        assert_eq!(p.get("base", "aws_access_key_id"), Some("AKIDCREDS"));
        assert_eq!(
            p.get("base", "aws_secret_access_key"),
            Some("from-credentials#not-a-comment")
        );
        assert_eq!(p.get("default", "region"), Some("eu-west-1"));
        assert_eq!(p.get("base", "max_concurrent_requests"), None);
        assert!(
            !p.contains("corp"),
            "an sso-session section is not a profile"
        );
    }

    #[test]
    fn role_arn_with_source_profile_assumes_the_role_with_the_source_profiles_keys() {
        let p = Profiles::parse(Some(CONFIG), Some(CREDENTIALS));
        let s = p.source("dev", "sess", &no_named).unwrap().unwrap();
        let Source::AssumeRole {
            role_arn,
            session_name,
            external_id,
            base,
        } = s
        else {
            panic!("{s:?}")
        };
        assert_eq!(role_arn, "arn:aws:iam::123456789012:role/dev");
        assert_eq!(session_name, "sess");
        assert_eq!(external_id.as_deref(), Some("ext-1"));
        let Source::Static { credentials, .. } = *base else {
            panic!("{base:?}")
        };
        assert_eq!(credentials.access_key_id, "AKIDCREDS");
        assert_eq!(
            credentials.session_token.as_ref().map(Secret::expose),
            Some("tok")
        );
    }

    #[test]
    fn a_region_only_profile_has_no_credentials_and_loops_are_refused() {
        let p = Profiles::parse(Some(CONFIG), None);
        assert_eq!(p.source("default", "s", &no_named), Ok(None));
        assert_eq!(p.source("missing", "s", &no_named), Ok(None));
        let e = p.source("loop-a", "s", &no_named).unwrap_err();
        assert!(e.contains("loop"), "{e}");
    }

    #[test]
    fn credential_source_is_asked_of_the_caller() {
        let p = Profiles::parse(Some(CONFIG), None);
        let env = |name: &str| {
            assert_eq!(name, "Environment");
            Ok(Source::InstanceProfile {
                endpoint: "x".into(),
            })
        };
        let s = p.source("ci", "s", &env).unwrap().unwrap();
        assert_eq!(s.kind(), "assume_role");
    }

    #[test]
    fn sso_and_credential_process_profiles_are_refused_by_name() {
        let p = Profiles::parse(Some("[profile x]\ncredential_process = /bin/creds\n"), None);
        let e = p.source("x", "s", &no_named).unwrap_err();
        assert!(e.contains("credential_process"), "{e}");
    }
}
