//! Which cluster a placement command talks to and how it trusts it.

use std::path::PathBuf;

use meridian::client::{Client, ClientOptions};
use meridian::tls::Trust;

#[derive(Debug, Clone, clap::Args)]
pub struct TargetArgs {
    /// Members' client addresses, host:port.
    #[arg(long, value_delimiter = ',', required = true)]
    pub endpoints: Vec<String>,
    /// The server's certificate or CA (DATA_DIR/tls/ca.pem of a self-signed server).
    #[arg(long, conflicts_with = "insecure")]
    pub ca: Option<PathBuf>,
    /// Skip certificate verification.
    #[arg(long)]
    pub insecure: bool,
}

/// `--ca FILE` or `--insecure`, exactly one (every loadgen command takes the pair).
pub fn trust(ca: Option<&PathBuf>, insecure: bool) -> anyhow::Result<Trust> {
    match (ca, insecure) {
        (Some(ca), false) => Ok(Trust::Ca(ca.clone())),
        (None, true) => Ok(Trust::Insecure),
        _ => anyhow::bail!("pass --ca FILE (the server's DATA_DIR/tls/ca.pem) or --insecure"),
    }
}

impl TargetArgs {
    pub fn trust(&self) -> anyhow::Result<Trust> {
        trust(self.ca.as_ref(), self.insecure)
    }

    pub async fn connect(&self) -> anyhow::Result<Client> {
        let opts = ClientOptions::new(self.endpoints.clone(), self.trust()?);
        Ok(Client::connect(opts).await?)
    }
}
