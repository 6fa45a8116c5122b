//! A channel to a member's PD-compatible gRPC front end, for kvproto's generated `PdClient`
//! (loadgen's `--protocol grpc`, the interoperability tests). TLS verifies against the given CA
//! file and presents the client certificate `trust` names; `Trust::Insecure` has no meaning
//! here, since tonic cannot skip verification. A test and load tool of the PD front end, not
//! part of the QUIC client (`meridian-client`): it uses the server's own kvproto conversions,
//! and must not serve anything.

use anyhow::Context;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use crate::kvproto::pdpb::pd_client::PdClient;
use crate::tls::Trust;

/// Meridian's regions and peers in kvproto form, as a store sends them (the server's own
/// conversions, so a client and the front end cannot disagree on a field).
pub use crate::server::grpc::convert::{leader_to, region_to};

/// Connects to `addr` (`host:port`), verifying the server's certificate for `localhost` or the
/// host given, against `trust`'s CA file.
pub async fn connect(addr: &str, trust: &Trust) -> anyhow::Result<PdClient<Channel>> {
    Ok(PdClient::new(channel(addr, trust).await?)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20))
}

/// The cluster id a member answers GetMembers with: what every later request's header carries.
pub async fn cluster_id(pd: &mut PdClient<Channel>) -> anyhow::Result<u64> {
    let members = pd
        .get_members(crate::kvproto::pdpb::GetMembersRequest::default())
        .await
        .context("GetMembers")?
        .into_inner();
    members
        .header
        .map(|h| h.cluster_id)
        .context("GetMembers answered without a header")
}

/// The TLS channel alone, for raw calls.
pub async fn channel(addr: &str, trust: &Trust) -> anyhow::Result<Channel> {
    let Some(ca) = trust.ca() else {
        anyhow::bail!("gRPC needs --ca: the front end is always TLS");
    };
    let pem = std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?;
    let host = addr
        .rsplit_once(':')
        .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']'))
        .unwrap_or(addr);
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pem))
        .domain_name(host.to_string());
    if let Some((cert, key)) = trust.identity_pem()? {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    Channel::from_shared(format!("https://{addr}"))
        .context("gRPC address")?
        .tls_config(tls)?
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("connecting to gRPC {addr}"))
}
