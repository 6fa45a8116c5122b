//! How large a QUIC datagram may grow: the UDP payload an endpoint accepts and the bound that
//! path MTU discovery searches up to, for server and client alike. It owns only those two
//! settings; certificates and the rest of the transport stay in `tls` (here and in the server).
//!
//! Every QUIC packet costs a fixed amount of work on both ends (a send or receive, AEAD and header
//! protection, acknowledgement bookkeeping) whatever it carries. Pipelined heartbeats and TSO
//! batches fill packets, so fewer, larger packets are less work per request. quinn starts at
//! 1200 bytes and stops its discovery at 1452 (Ethernet); letting discovery go on to the UDP
//! maximum costs nothing where the path is Ethernet (the probes that do not fit are lost, and
//! the connection stays at what did fit) and lets loopback, jumbo-frame networks and same-host
//! clients use what they have. The measurements are in tuning.md.

/// The largest UDP payload IPv6 can carry (its 65535-byte payload length minus the 8-byte UDP
/// header), and quinn's own ceiling. IPv4 carries 20 bytes less; discovery finds that too.
pub const MAX_UDP_PAYLOAD: u16 = 65_527;

/// The smallest payload QUIC allows (RFC 9000 section 14): every path must carry it.
pub const MIN_UDP_PAYLOAD: u16 = 1_200;

/// Lets path MTU discovery search up to `max_payload` bytes per datagram.
pub fn discover_up_to(transport: &mut quinn::TransportConfig, max_payload: u16) {
    let mut discovery = quinn::MtuDiscoveryConfig::default();
    discovery.upper_bound(max_payload);
    transport.mtu_discovery_config(Some(discovery));
}

/// A payload size outside what QUIC allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("max UDP payload {0} is outside {MIN_UDP_PAYLOAD}..={MAX_UDP_PAYLOAD}")]
pub struct PayloadOutOfRange(pub u16);

/// Accepts datagrams of up to `max_payload` bytes (advertised to peers as the
/// `max_udp_payload_size` transport parameter, so they never send larger ones).
pub fn accept_up_to(
    endpoint: &mut quinn::EndpointConfig,
    max_payload: u16,
) -> Result<(), PayloadOutOfRange> {
    endpoint
        .max_udp_payload_size(max_payload)
        .map(|_| ())
        .map_err(|_| PayloadOutOfRange(max_payload))
}
