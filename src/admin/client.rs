//! A small blocking client for the admin HTTP API, used by `meridian ctl` and the tests.

use std::time::Duration;

pub struct AdminClient {
    agent: ureq::Agent,
    base: String,
}

impl AdminClient {
    /// `addr` is `host:port` or a full `http://host:port` URL.
    pub fn new(addr: &str) -> AdminClient {
        Self::with_timeout(addr, Duration::from_secs(5))
    }

    pub fn with_timeout(addr: &str, timeout: Duration) -> AdminClient {
        let base = if addr.starts_with("http://") || addr.starts_with("https://") {
            addr.trim_end_matches('/').to_string()
        } else {
            format!("http://{addr}")
        };
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .build()
            .into();
        AdminClient { agent, base }
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

    /// Status code and body of a DELETE.
    pub fn delete(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let mut response = self.agent.delete(format!("{}{path}", self.base)).call()?;
        let status = response.status().as_u16();
        Ok((status, response.body_mut().read_to_string()?))
    }

    /// Status code and JSON body of a GET.
    pub fn get_json(&self, path: &str) -> anyhow::Result<(u16, serde_json::Value)> {
        let (status, body) = self.get(path)?;
        let json =
            serde_json::from_str(&body).map_err(|e| anyhow::anyhow!("GET {path}: {e}: {body}"))?;
        Ok((status, json))
    }
}
