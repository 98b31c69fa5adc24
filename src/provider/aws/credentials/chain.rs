//! The default credential chain, in the order AWS's SDKs and CLI follow: environment
//! variables, the shared config and credentials files, web identity (IRSA), container
//! credentials (ECS, EKS Pod Identity), then the instance profile through IMDSv2. The first
//! source that is configured wins; it is resolved once, at start-up.

use std::path::{Path, PathBuf};

use super::profile::Profiles;
use super::source::{CONTAINER_HOST, IMDS_ENDPOINT, Source};
use crate::provider::aws::settings::AwsCredentials;
use crate::provider::secret::Secret;

/// The session name of assumed roles when none is configured.
pub const DEFAULT_SESSION_NAME: &str = "trainscaler";

/// What the chain found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// `None` only when every source is absent and IMDS is disabled.
    pub source: Option<Source>,
    /// The selected profile's `region`, used when `AWS_REGION` is unset.
    pub profile_region: Option<String>,
}

/// Resolves the chain from variables (`get`, blank values count as unset) and files (`read`).
pub fn resolve(
    get: &dyn Fn(&str) -> Option<String>,
    read: &dyn Fn(&Path) -> Option<String>,
) -> Result<Chain, String> {
    let explicit_profile = get("AWS_PROFILE").or_else(|| get("AWS_DEFAULT_PROFILE"));
    let profile = explicit_profile.clone().unwrap_or_else(|| "default".into());
    let home = get("HOME").map(PathBuf::from);
    let file = |var: &str, default: &str| -> Option<String> {
        let path = get(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))?;
        read(&path)
    };
    let profiles = Profiles::parse(
        file("AWS_CONFIG_FILE", "config").as_deref(),
        file("AWS_SHARED_CREDENTIALS_FILE", "credentials").as_deref(),
    );
    let profile_region = profiles.get(&profile, "region").map(str::to_string);
    let chain = |source| {
        Ok(Chain {
            source,
            profile_region: profile_region.clone(),
        })
    };

    if let Some(s) = environment(get)? {
        return chain(Some(s));
    }
    let session = get("AWS_ROLE_SESSION_NAME").unwrap_or_else(|| DEFAULT_SESSION_NAME.into());
    let named = |name: &str| named_source(name, get);
    if let Some(s) = profiles.source(&profile, &session, &named)? {
        return chain(Some(s));
    }
    if let Some(p) = explicit_profile
        && !profiles.contains(&p)
    {
        return Err(format!(
            "AWS_PROFILE names profile {p}, which neither the config nor the credentials file has"
        ));
    }
    if let Some(s) = web_identity(get) {
        return chain(Some(s));
    }
    if let Some(s) = container(get)? {
        return chain(Some(s));
    }
    chain(instance_profile(get))
}

fn environment(get: &dyn Fn(&str) -> Option<String>) -> Result<Option<Source>, String> {
    let Some(id) = get("AWS_ACCESS_KEY_ID") else {
        return Ok(None);
    };
    let secret = get("AWS_SECRET_ACCESS_KEY")
        .ok_or("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")?;
    Ok(Some(Source::Static {
        credentials: AwsCredentials {
            access_key_id: id,
            secret_access_key: Secret::new(secret),
            session_token: get("AWS_SESSION_TOKEN").map(Secret::new),
        },
        origin: "environment",
        profile: None,
    }))
}

fn web_identity(get: &dyn Fn(&str) -> Option<String>) -> Option<Source> {
    Some(Source::WebIdentity {
        token_file: PathBuf::from(get("AWS_WEB_IDENTITY_TOKEN_FILE")?),
        role_arn: get("AWS_ROLE_ARN")?,
        session_name: get("AWS_ROLE_SESSION_NAME").unwrap_or_else(|| DEFAULT_SESSION_NAME.into()),
    })
}

fn container(get: &dyn Fn(&str) -> Option<String>) -> Result<Option<Source>, String> {
    let uri = match (
        get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
        get("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
    ) {
        (Some(relative), _) => format!("{CONTAINER_HOST}{relative}"),
        (None, Some(full)) => {
            check_full_uri(&full)?;
            full
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(Source::Container {
        uri,
        token_file: get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE").map(PathBuf::from),
        token: get("AWS_CONTAINER_AUTHORIZATION_TOKEN").map(Secret::new),
    }))
}

/// A full URI over plain HTTP may only point at this host or at the ECS and EKS Pod Identity
/// agents, as the SDKs enforce: credentials must not cross a network in clear text.
fn check_full_uri(uri: &str) -> Result<(), String> {
    let url = url::Url::parse(uri)
        .map_err(|e| format!("AWS_CONTAINER_CREDENTIALS_FULL_URI {uri:?} is not a URL: {e}"))?;
    if url.scheme() == "https" {
        return Ok(());
    }
    let allowed = match url.host() {
        Some(url::Host::Ipv4(ip)) => {
            ip.is_loopback()
                || ip == std::net::Ipv4Addr::new(169, 254, 170, 2)
                || ip == std::net::Ipv4Addr::new(169, 254, 170, 23)
        }
        Some(url::Host::Ipv6(ip)) => {
            ip.is_loopback() || ip == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)
        }
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    if url.scheme() == "http" && allowed {
        Ok(())
    } else {
        Err(format!(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI {uri:?} must be https, or http to a loopback \
             address or the ECS (169.254.170.2) or EKS Pod Identity (169.254.170.23, \
             fd00:ec2::23) agent"
        ))
    }
}

fn instance_profile(get: &dyn Fn(&str) -> Option<String>) -> Option<Source> {
    if get("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return None;
    }
    let endpoint = get("AWS_EC2_METADATA_SERVICE_ENDPOINT")
        .unwrap_or_else(|| IMDS_ENDPOINT.into())
        .trim_end_matches('/')
        .to_string();
    Some(Source::InstanceProfile { endpoint })
}

/// A profile's `credential_source`.
fn named_source(name: &str, get: &dyn Fn(&str) -> Option<String>) -> Result<Source, String> {
    let missing = |what: &str| format!("credential_source {name} but {what}");
    match name {
        "Environment" => environment(get)?.ok_or_else(|| missing("AWS_ACCESS_KEY_ID is not set")),
        "Ec2InstanceMetadata" => {
            instance_profile(get).ok_or_else(|| missing("AWS_EC2_METADATA_DISABLED is true"))
        }
        "EcsContainer" => {
            container(get)?.ok_or_else(|| missing("no AWS_CONTAINER_CREDENTIALS_*_URI is set"))
        }
        other => Err(format!(
            "credential_source {other} is not one of Environment, Ec2InstanceMetadata, EcsContainer"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve_with(vars: &[(&str, &str)], files: &[(&str, &str)]) -> Result<Chain, String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let files: HashMap<PathBuf, String> = files
            .iter()
            .map(|(k, v)| (PathBuf::from(k), v.to_string()))
            .collect();
        resolve(&|n| vars.get(n).cloned(), &|p| files.get(p).cloned())
    }

    fn kind(vars: &[(&str, &str)], files: &[(&str, &str)]) -> &'static str {
        resolve_with(vars, files)
            .expect("chain")
            .source
            .map_or("none", |s| s.kind())
    }

    const KEYS: [(&str, &str); 2] = [
        ("AWS_ACCESS_KEY_ID", "AKID"),
        ("AWS_SECRET_ACCESS_KEY", "s"),
    ];
    const FILES: [(&str, &str); 2] = [("AWS_CONFIG_FILE", "/c"), ("AWS_PROFILE", "p")];
    const PROFILE: (&str, &str) = (
        "/c",
        "[profile p]\naws_access_key_id=A\naws_secret_access_key=B\nregion=ap-south-1\n",
    );
    const IRSA: [(&str, &str); 2] = [
        ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/token"),
        ("AWS_ROLE_ARN", "arn:aws:iam::1:role/irsa"),
    ];
    const POD_IDENTITY: [(&str, &str); 2] = [
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "http://169.254.170.23/v1/credentials",
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            "/var/run/secrets/pod-identity/token",
        ),
    ];

    #[test]
    fn each_source_beats_the_ones_after_it() {
        let all: Vec<_> = KEYS
            .iter()
            .chain(&FILES)
            .chain(&IRSA)
            .chain(&POD_IDENTITY)
            .copied()
            .collect();
        assert_eq!(kind(&all, &[PROFILE]), "environment");
        let no_env: Vec<_> = all[2..].to_vec();
        assert_eq!(kind(&no_env, &[PROFILE]), "profile");
        let no_profile: Vec<_> = all[4..].to_vec();
        assert_eq!(kind(&no_profile, &[]), "web_identity");
        let no_irsa: Vec<_> = all[6..].to_vec();
        assert_eq!(kind(&no_irsa, &[]), "container");
        assert_eq!(kind(&[], &[]), "instance_profile");
        assert_eq!(kind(&[("AWS_EC2_METADATA_DISABLED", "true")], &[]), "none");
    }

    #[test]
    fn the_profiles_region_is_kept_and_the_default_files_live_under_home() {
        let c = resolve_with(&FILES, &[PROFILE]).unwrap();
        assert_eq!(c.profile_region.as_deref(), Some("ap-south-1"));
        let c = resolve_with(
            &[("HOME", "/home/u")],
            &[(
                "/home/u/.aws/credentials",
                "[default]\naws_access_key_id=H\naws_secret_access_key=S\n",
            )],
        )
        .unwrap();
        let Some(Source::Static {
            credentials,
            profile,
            ..
        }) = c.source
        else {
            panic!("{c:?}")
        };
        assert_eq!(credentials.access_key_id, "H");
        assert_eq!(profile.as_deref(), Some("default"));
    }

    #[test]
    fn a_missing_named_profile_and_half_set_keys_are_errors() {
        let e = resolve_with(&[("AWS_PROFILE", "nope")], &[]).unwrap_err();
        assert!(e.contains("nope"), "{e}");
        let e = resolve_with(&[("AWS_ACCESS_KEY_ID", "A")], &[]).unwrap_err();
        assert!(e.contains("AWS_SECRET_ACCESS_KEY"), "{e}");
    }

    #[test]
    fn container_uris_resolve_relative_to_the_ecs_agent_and_refuse_clear_text_elsewhere() {
        let c = resolve_with(
            &[(
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "/v2/credentials/abc",
            )],
            &[],
        )
        .unwrap();
        let Some(Source::Container { uri, .. }) = c.source else {
            panic!("{c:?}")
        };
        assert_eq!(uri, "http://169.254.170.2/v2/credentials/abc");
        for ok in [
            "http://127.0.0.1:8080/creds",
            "http://[fd00:ec2::23]/v1/credentials",
            "https://creds.example.com/x",
        ] {
            assert!(
                resolve_with(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", ok)], &[]).is_ok(),
                "{ok}"
            );
        }
        let e = resolve_with(
            &[(
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://10.0.0.5/creds",
            )],
            &[],
        )
        .unwrap_err();
        assert!(e.contains("https"), "{e}");
    }

    #[test]
    fn the_imds_endpoint_can_be_overridden() {
        let c = resolve_with(
            &[(
                "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                "http://127.0.0.1:1338/",
            )],
            &[],
        )
        .unwrap();
        assert_eq!(
            c.source,
            Some(Source::InstanceProfile {
                endpoint: "http://127.0.0.1:1338".into()
            })
        );
    }
}
