//! How this node is let into etcd: TLS (`--etcd-ca`, and the client pair `--etcd-cert` and
//! `--etcd-key` for an etcd run with `--client-cert-auth`) and an etcd user (`--etcd-user`, with
//! the password from `--etcd-password-file` or `MERIDIAN_ETCD_PASSWORD`).
//!
//! Owns reading and checking that material once, at start, so a missing or unreadable file is an
//! error naming its flag and path before anything else happens, and turning it into
//! etcd-client's `ConnectOptions`. The password never comes from the command line, where `ps`
//! shows it to every user of the host, and neither it nor the private key appears in `Debug`
//! output or in a message.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

/// The environment variable a password may come from (a Kubernetes Secret mapped to the
/// environment, for example).
pub const PASSWORD_ENV: &str = "MERIDIAN_ETCD_PASSWORD";

/// etcd's requests and connection attempts each give up after this long.
const TIMEOUT: Duration = Duration::from_secs(3);

/// The flags as given on the command line: paths and a user name, nothing read yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdAccessFlags {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub user: Option<String>,
    pub password_file: Option<PathBuf>,
}

/// A PEM file read at start, with the path it came from for messages.
#[derive(Clone)]
struct PemFile {
    path: PathBuf,
    pem: Vec<u8>,
}

/// A value that must not be shown: the password, the private key.
#[derive(Clone)]
struct Secret<T>(T);

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Everything needed to connect to etcd, loaded and checked. `Default` is plain etcd: no TLS,
/// no user.
#[derive(Clone, Default)]
pub struct EtcdAccess {
    /// The CA that signed etcd's server certificate; present whenever TLS is on.
    ca: Option<PemFile>,
    /// The client certificate and its key, for `--client-cert-auth`.
    identity: Option<(PemFile, Secret<PemFile>)>,
    user: Option<(String, Secret<String>)>,
}

impl fmt::Debug for EtcdAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdAccess")
            .field("ca", &self.ca.as_ref().map(|c| &c.path))
            .field("cert", &self.identity.as_ref().map(|(c, _)| &c.path))
            .field("key", &self.identity.as_ref().map(|(_, k)| &k.0.path))
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .field("password", &self.user.as_ref().map(|(_, p)| p))
            .finish()
    }
}

fn read_flag(flag: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("{flag} {}: cannot read it", path.display()))
}

/// Reads a PEM file that must hold at least one certificate.
fn read_certs(flag: &str, path: &Path) -> anyhow::Result<PemFile> {
    let pem = read_flag(flag, path)?;
    let certs = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{flag} {}: not valid PEM", path.display()))?;
    // tonic skips what it cannot parse, so an empty file would only show up as a failed
    // handshake much later.
    anyhow::ensure!(
        !certs.is_empty(),
        "{flag} {}: no PEM certificate in it",
        path.display()
    );
    Ok(PemFile {
        path: path.to_path_buf(),
        pem,
    })
}

fn read_key(flag: &str, path: &Path) -> anyhow::Result<PemFile> {
    let pem = read_flag(flag, path)?;
    rustls_pemfile::private_key(&mut &pem[..])
        .with_context(|| format!("{flag} {}: not valid PEM", path.display()))?
        .with_context(|| format!("{flag} {}: no PEM private key in it", path.display()))?;
    Ok(PemFile {
        path: path.to_path_buf(),
        pem,
    })
}

/// The password in a file: one trailing newline is the editor's, not the password's.
fn read_password_file(path: &Path) -> anyhow::Result<String> {
    let bytes = read_flag("--etcd-password-file", path)?;
    let text = String::from_utf8(bytes).map_err(|_| {
        anyhow::anyhow!(
            "--etcd-password-file {}: the password is not UTF-8",
            path.display()
        )
    })?;
    let password = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    warn_if_shared(path);
    Ok(password.to_string())
}

/// A password file others on the host can read is not much of a secret; say so, but run.
fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                "--etcd-password-file is readable by group or others; chmod 600 it"
            );
        }
    }
}

impl EtcdAccess {
    /// Reads and checks what `flags` name. `env_password` is `MERIDIAN_ETCD_PASSWORD` as the
    /// caller found it (passed in so this stays testable without touching the environment).
    pub fn from_flags(
        flags: EtcdAccessFlags,
        env_password: Option<String>,
    ) -> anyhow::Result<EtcdAccess> {
        let identity = match (&flags.cert, &flags.key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some((
                read_certs("--etcd-cert", cert)?,
                Secret(read_key("--etcd-key", key)?),
            )),
            _ => anyhow::bail!("--etcd-cert and --etcd-key go together"),
        };
        anyhow::ensure!(
            identity.is_none() || flags.ca.is_some(),
            "--etcd-cert needs --etcd-ca: the CA that signed etcd's server certificate"
        );
        let ca = match &flags.ca {
            Some(ca) => Some(read_certs("--etcd-ca", ca)?),
            None => None,
        };
        let password = match (&flags.password_file, env_password) {
            (Some(_), Some(_)) => anyhow::bail!(
                "both --etcd-password-file and {PASSWORD_ENV} are set: give the password one way"
            ),
            (Some(file), None) => Some(read_password_file(file)?),
            (None, env) => env,
        };
        let user = match (flags.user, password) {
            (None, None) => None,
            (None, Some(_)) => anyhow::bail!(
                "an etcd password is given (--etcd-password-file or {PASSWORD_ENV}) but no \
                 --etcd-user"
            ),
            (Some(user), None) => anyhow::bail!(
                "--etcd-user {user} needs a password: --etcd-password-file FILE or \
                 {PASSWORD_ENV}, never the command line"
            ),
            (Some(user), Some(password)) => {
                anyhow::ensure!(!user.is_empty(), "--etcd-user is empty");
                anyhow::ensure!(!password.is_empty(), "the etcd password is empty");
                Some((user, Secret(password)))
            }
        };
        Ok(EtcdAccess { ca, identity, user })
    }

    /// Whether connections are TLS.
    pub fn tls(&self) -> bool {
        self.ca.is_some()
    }

    /// Whether any access flag was given.
    pub fn is_default(&self) -> bool {
        self.ca.is_none() && self.identity.is_none() && self.user.is_none()
    }

    /// Checks that `endpoints` suit this access: `https://` needs the CA, TLS files need
    /// `https://` (or no scheme, which then means TLS), and access flags need an etcd at all.
    pub fn check_endpoints(&self, endpoints: &[String]) -> anyhow::Result<()> {
        anyhow::ensure!(
            !endpoints.is_empty() || self.is_default(),
            "--etcd-ca, --etcd-cert, --etcd-key and --etcd-user need --etcd"
        );
        for endpoint in endpoints {
            if endpoint.starts_with("https://") {
                anyhow::ensure!(
                    self.tls(),
                    "--etcd {endpoint} is TLS: pass --etcd-ca, the CA that signed etcd's \
                     server certificate"
                );
            } else if endpoint.starts_with("http://") {
                anyhow::ensure!(
                    !self.tls(),
                    "--etcd {endpoint} is plain http but --etcd-ca asks for TLS: use https://"
                );
            }
        }
        if !self.tls() && self.user.is_some() {
            tracing::warn!(
                "--etcd-user without TLS: the etcd password crosses the network in clear text"
            );
        }
        Ok(())
    }

    /// What this access is, for messages: paths and the user name, never a secret.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match (&self.ca, &self.identity) {
            (Some(ca), Some((cert, _))) => parts.push(format!(
                "TLS with CA {} and client certificate {}",
                ca.path.display(),
                cert.path.display()
            )),
            (Some(ca), None) => parts.push(format!(
                "TLS with CA {}, no client certificate",
                ca.path.display()
            )),
            _ => parts.push("plain http".to_string()),
        }
        if let Some((user, _)) = &self.user {
            parts.push(format!("user {user}"));
        }
        parts.join(", ")
    }

    /// What to try when connecting failed with this access, if there is a likely cause: an
    /// etcd run with `--client-cert-auth` drops a TLS client without a certificate during or
    /// right after the handshake, which can reach the client as a bare closed connection.
    pub fn hint(&self) -> Option<&'static str> {
        (self.tls() && self.identity.is_none())
            .then_some("if etcd runs with --client-cert-auth, pass --etcd-cert and --etcd-key")
    }

    /// TLS for a gRPC channel of Meridian's own to etcd (the etcd endpoint at the client
    /// address forwards over one): the same CA and client certificate as
    /// [`Self::connect_options`]; `None` for plain http.
    pub(crate) fn grpc_tls(&self) -> Option<tonic::transport::ClientTlsConfig> {
        let ca = self.ca.as_ref()?;
        let mut tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&ca.pem));
        if let Some((cert, key)) = &self.identity {
            tls = tls.identity(tonic::transport::Identity::from_pem(&cert.pem, &key.0.pem));
        }
        Some(tls)
    }

    /// The etcd user and password, for a channel that logs in by itself. Never log them.
    pub(crate) fn credentials(&self) -> Option<(&str, &str)> {
        self.user
            .as_ref()
            .map(|(user, password)| (user.as_str(), password.0.as_str()))
    }

    /// `endpoint` as a URL: one without a scheme is `https://` when TLS is on, as etcd-client
    /// reads it.
    pub(crate) fn endpoint_url(&self, endpoint: &str) -> String {
        if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
            endpoint.to_string()
        } else if self.tls() {
            format!("https://{endpoint}")
        } else {
            format!("http://{endpoint}")
        }
    }

    /// etcd-client's options for this access. They hold the password: never log them (their
    /// `Debug` prints it).
    pub(super) fn connect_options(&self) -> etcd_client::ConnectOptions {
        let mut options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(TIMEOUT)
            .with_timeout(TIMEOUT);
        if let Some(ca) = &self.ca {
            let mut tls = etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(&ca.pem));
            if let Some((cert, key)) = &self.identity {
                tls = tls.identity(etcd_client::Identity::from_pem(&cert.pem, &key.0.pem));
            }
            options = options.with_tls(tls);
        }
        if let Some((user, password)) = &self.user {
            // A token dies with an etcd restart (and after --auth-token-ttl idle): without a
            // refresh every later request would fail with "invalid auth token".
            options = options
                .with_user(user.clone(), password.0.clone())
                .with_auto_token_refresh(true);
        }
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::cert;

    struct Files {
        _dir: tempfile::TempDir,
        ca: PathBuf,
        cert: PathBuf,
        key: PathBuf,
        password: PathBuf,
        dir: PathBuf,
    }

    fn files() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let ca = cert::create_ca("etcd test CA").unwrap();
        let client = cert::create_client(&ca, "meridian", cert::Role::Member).unwrap();
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("ca.pem"), &ca.cert).unwrap();
        std::fs::write(path.join("client.pem"), &client.cert).unwrap();
        std::fs::write(path.join("client-key.pem"), &client.key).unwrap();
        std::fs::write(path.join("password"), "s3cret-Pa55\n").unwrap();
        Files {
            ca: path.join("ca.pem"),
            cert: path.join("client.pem"),
            key: path.join("client-key.pem"),
            password: path.join("password"),
            dir: path,
            _dir: dir,
        }
    }

    fn tls_flags(f: &Files) -> EtcdAccessFlags {
        EtcdAccessFlags {
            ca: Some(f.ca.clone()),
            cert: Some(f.cert.clone()),
            key: Some(f.key.clone()),
            ..Default::default()
        }
    }

    fn err(flags: EtcdAccessFlags, env: Option<&str>) -> String {
        format!(
            "{:#}",
            EtcdAccess::from_flags(flags, env.map(str::to_string)).unwrap_err()
        )
    }

    #[test]
    fn no_flags_is_plain_etcd_and_fits_http_endpoints_only() {
        let access = EtcdAccess::from_flags(EtcdAccessFlags::default(), None).unwrap();
        assert!(access.is_default() && !access.tls());
        access
            .check_endpoints(&["http://127.0.0.1:2379".into(), "127.0.0.1:1".into()])
            .unwrap();
        access.check_endpoints(&[]).unwrap();
        let e = access
            .check_endpoints(&["https://127.0.0.1:2379".into()])
            .unwrap_err();
        assert!(e.to_string().contains("--etcd-ca"), "{e}");
    }

    #[test]
    fn tls_files_are_read_and_need_https() {
        let f = files();
        let access = EtcdAccess::from_flags(tls_flags(&f), None).unwrap();
        assert!(access.tls());
        access
            .check_endpoints(&["https://127.0.0.1:2379".into()])
            .unwrap();
        let e = access
            .check_endpoints(&["http://127.0.0.1:2379".into()])
            .unwrap_err();
        assert!(e.to_string().contains("use https://"), "{e}");
        let e = access.check_endpoints(&[]).unwrap_err();
        assert!(e.to_string().contains("need --etcd"), "{e}");
        assert!(access.describe().contains("client.pem"));
    }

    #[test]
    fn a_missing_or_wrong_file_names_its_flag_and_path() {
        let f = files();
        let missing = f.dir.join("nope.pem");
        for (flag, flags) in [
            (
                "--etcd-ca",
                EtcdAccessFlags {
                    ca: Some(missing.clone()),
                    ..tls_flags(&f)
                },
            ),
            (
                "--etcd-cert",
                EtcdAccessFlags {
                    cert: Some(missing.clone()),
                    ..tls_flags(&f)
                },
            ),
            (
                "--etcd-key",
                EtcdAccessFlags {
                    key: Some(missing.clone()),
                    ..tls_flags(&f)
                },
            ),
            (
                "--etcd-password-file",
                EtcdAccessFlags {
                    user: Some("meridian".into()),
                    password_file: Some(missing.clone()),
                    ..Default::default()
                },
            ),
        ] {
            let e = err(flags, None);
            assert!(
                e.contains(flag) && e.contains(&missing.display().to_string()),
                "{flag}: {e}"
            );
        }
        // A key where the certificate should be, and a certificate where the key should be.
        let e = err(
            EtcdAccessFlags {
                ca: Some(f.key.clone()),
                ..tls_flags(&f)
            },
            None,
        );
        assert!(
            e.contains("--etcd-ca") && e.contains("no PEM certificate"),
            "{e}"
        );
        let e = err(
            EtcdAccessFlags {
                key: Some(f.cert.clone()),
                ..tls_flags(&f)
            },
            None,
        );
        assert!(
            e.contains("--etcd-key") && e.contains("no PEM private key"),
            "{e}"
        );
    }

    #[test]
    fn the_pair_goes_together_and_needs_the_ca() {
        let f = files();
        let e = err(
            EtcdAccessFlags {
                key: None,
                ..tls_flags(&f)
            },
            None,
        );
        assert!(e.contains("go together"), "{e}");
        let e = err(
            EtcdAccessFlags {
                ca: None,
                ..tls_flags(&f)
            },
            None,
        );
        assert!(e.contains("needs --etcd-ca"), "{e}");
    }

    #[test]
    fn the_password_comes_from_a_file_or_the_environment_never_both_and_never_alone() {
        let f = files();
        let user = |password_file: Option<PathBuf>| EtcdAccessFlags {
            user: Some("meridian".into()),
            password_file,
            ..Default::default()
        };
        let from_file = EtcdAccess::from_flags(user(Some(f.password.clone())), None).unwrap();
        // The file's trailing newline is not part of the password.
        assert_eq!(
            from_file
                .user
                .as_ref()
                .map(|(u, p)| (u.as_str(), p.0.as_str())),
            Some(("meridian", "s3cret-Pa55"))
        );
        let from_env = EtcdAccess::from_flags(user(None), Some("envpw".into())).unwrap();
        assert_eq!(
            from_env.user.as_ref().map(|(_, p)| p.0.as_str()),
            Some("envpw")
        );

        assert!(err(user(Some(f.password.clone())), Some("x")).contains("both"));
        assert!(err(user(None), None).contains("needs a password"));
        let no_user = EtcdAccessFlags {
            password_file: Some(f.password.clone()),
            ..Default::default()
        };
        assert!(err(no_user, None).contains("no --etcd-user"));
        assert!(err(EtcdAccessFlags::default(), Some("x")).contains("no --etcd-user"));
        assert!(err(user(None), Some("")).contains("empty"));
    }

    #[test]
    fn debug_and_messages_never_show_the_password_or_the_key() {
        let f = files();
        let access = EtcdAccess::from_flags(
            EtcdAccessFlags {
                user: Some("meridian".into()),
                password_file: Some(f.password.clone()),
                ..tls_flags(&f)
            },
            None,
        )
        .unwrap();
        let key_pem = std::fs::read_to_string(&f.key).unwrap();
        let key_body = key_pem.lines().nth(1).unwrap();
        for shown in [format!("{access:?}"), access.describe()] {
            assert!(!shown.contains("s3cret-Pa55"), "{shown}");
            assert!(!shown.contains(key_body), "{shown}");
            assert!(shown.contains("meridian"), "{shown}");
        }
        assert!(format!("{access:?}").contains("<redacted>"));
    }
}
