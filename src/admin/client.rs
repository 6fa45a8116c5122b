//! A small blocking client for the admin HTTPS API, used by `meridian ctl`, the members'
//! health probes of each other, the operator and the tests. It verifies the member against the
//! CA of its [`Trust`] and presents the client certificate the trust names.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use ureq::tls::{ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig, TlsProvider};

use crate::tls::Trust;

#[derive(Clone)]
pub struct AdminClient {
    agent: ureq::Agent,
    base: String,
}

impl AdminClient {
    /// `addr` is `host:port` (HTTPS) or a full `https://host:port` URL.
    pub fn new(addr: &str, trust: &Trust) -> anyhow::Result<AdminClient> {
        Self::with_timeout(addr, trust, Duration::from_secs(5))
    }

    pub fn with_timeout(
        addr: &str,
        trust: &Trust,
        timeout: Duration,
    ) -> anyhow::Result<AdminClient> {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .tls_config(tls_config(trust)?)
            .build()
            .into();
        Ok(AdminClient {
            agent,
            base: base_url(addr),
        })
    }

    /// A client that answers a redirect as it is instead of following it: a change sent to a
    /// PD HTTP API follower of an earlier release is answered 307 to the leader (a follower
    /// now sends it on itself), and ureq does not resend a body
    /// there; the caller sends it again itself ([`send`](Self::send) gives the `Location`).
    pub fn without_redirects(addr: &str, trust: &Trust) -> anyhow::Result<AdminClient> {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(10)))
            .tls_config(tls_config(trust)?)
            .build()
            .into();
        Ok(AdminClient {
            agent,
            base: base_url(addr),
        })
    }

    /// `method` on `path` with a JSON body or none: the status, the body and the `Location`
    /// header if there is one.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        json: Option<&serde_json::Value>,
    ) -> anyhow::Result<Answer> {
        let url = format!("{}{path}", self.base);
        let mut response = match (method, json) {
            ("GET", None) => self.agent.get(&url).call()?,
            ("DELETE", None) => self.agent.delete(&url).call()?,
            ("POST", Some(body)) => self
                .agent
                .post(&url)
                .header("content-type", "application/json")
                .send(body.to_string())?,
            ("POST", None) => self.agent.post(&url).send_empty()?,
            _ => anyhow::bail!("{method} with this body is not sent by this client"),
        };
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        Ok(Answer {
            status: response.status().as_u16(),
            body: response.body_mut().read_to_string()?,
            location,
        })
    }

    /// A plain-HTTP client for `url` (etcd's own `/health` in the test harness).
    pub fn plain(url: &str) -> AdminClient {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .into();
        AdminClient {
            agent,
            base: base_url(url),
        }
    }

    /// The same client (TLS settings, timeout) for another member's address.
    pub fn at(&self, addr: &str) -> AdminClient {
        AdminClient {
            agent: self.agent.clone(),
            base: base_url(addr),
        }
    }

    /// Status code and body of a GET.
    pub fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let mut response = self.agent.get(format!("{}{path}", self.base)).call()?;
        let status = response.status().as_u16();
        Ok((status, response.body_mut().read_to_string()?))
    }

    /// Status code and body of a POST with an empty body.
    pub fn post(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let mut response = self
            .agent
            .post(format!("{}{path}", self.base))
            .send_empty()?;
        let status = response.status().as_u16();
        Ok((status, response.body_mut().read_to_string()?))
    }

    /// Status code and body of a PUT of `body` (text).
    pub fn put(&self, path: &str, body: &str) -> anyhow::Result<(u16, String)> {
        let mut response = self.agent.put(format!("{}{path}", self.base)).send(body)?;
        let status = response.status().as_u16();
        Ok((status, response.body_mut().read_to_string()?))
    }

    /// Arms failpoint `name` with `actions` (a build with the `failpoints` feature;
    /// src/failpoint.rs); empty `actions` disarm it.
    pub fn failpoint(&self, name: &str, actions: &str) -> anyhow::Result<()> {
        let path = format!("/api/v1/debug/failpoints/{name}");
        let (status, body) = if actions.is_empty() {
            self.delete(&path)?
        } else {
            self.put(&path, actions)?
        };
        anyhow::ensure!(status == 200, "{name}={actions}: {status} {body}");
        Ok(())
    }

    /// Status code and body of a DELETE.
    pub fn delete(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let mut response = self.agent.delete(format!("{}{path}", self.base)).call()?;
        let status = response.status().as_u16();
        Ok((status, response.body_mut().read_to_string()?))
    }

    /// The value of an unlabelled Prometheus series (`name value`) from `/metrics`.
    pub fn metric(&self, name: &str) -> anyhow::Result<f64> {
        let (status, text) = self.get("/metrics")?;
        anyhow::ensure!(status == 200, "GET /metrics: {status}");
        text.lines()
            .find_map(|l| {
                let (series, value) = l.split_once(' ')?;
                (series == name).then(|| value.trim().parse().ok())?
            })
            .ok_or_else(|| anyhow::anyhow!("{name} missing from /metrics"))
    }

    /// Status code and JSON body of a GET.
    pub fn get_json(&self, path: &str) -> anyhow::Result<(u16, serde_json::Value)> {
        let (status, body) = self.get(path)?;
        let json =
            serde_json::from_str(&body).map_err(|e| anyhow::anyhow!("GET {path}: {e}: {body}"))?;
        Ok((status, json))
    }
}

/// What [`AdminClient::send`] got back.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    /// Where a redirect points.
    pub location: Option<String>,
}

fn base_url(addr: &str) -> String {
    if addr.starts_with("http://") || addr.starts_with("https://") {
        addr.trim_end_matches('/').to_string()
    } else {
        format!("https://{addr}")
    }
}

fn tls_config(trust: &Trust) -> anyhow::Result<TlsConfig> {
    let mut tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()));
    tls = match trust.ca() {
        Some(ca) => {
            let pem = std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?;
            let roots = ureq::tls::parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect::<Vec<_>>();
            anyhow::ensure!(!roots.is_empty(), "{} holds no certificate", ca.display());
            tls.root_certs(RootCerts::Specific(Arc::new(roots)))
        }
        None => tls.disable_verification(true),
    };
    if let Some((cert, key)) = trust.identity_pem()? {
        let chain = ureq::tls::parse_pem(&cert)
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect::<Vec<_>>();
        anyhow::ensure!(!chain.is_empty(), "the client certificate file holds none");
        let key = PrivateKey::from_pem(&key).context("reading the client key")?;
        tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
    }
    Ok(tls.build())
}
