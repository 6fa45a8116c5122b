//! Runtime configuration read from `--config FILE` (TOML). Every field has a default, so an empty
//! or absent file means the defaults; unknown fields are an error rather than silently ignored.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::datagram;
use crate::placement::{Limits, ScheduleConfig};
use crate::tso::WindowConfig;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub tso: WindowConfig,
    pub server: ServerConfig,
    pub election: ElectionConfig,
    pub schedule: ScheduleConfig,
    pub limits: Limits,
    pub security: SecurityConfig,
    pub debug: DebugConfig,
}

/// Who a client certificate is, beyond its `meridian://role/` SANs: PD's `cert-allowed-cn`,
/// with roles, for certificates from a PKI of the operator's own (TiKV's and TiDB's), and
/// whether a `store` certificate is bound to one store. Written in PD's kebab-case (the
/// snake_case spellings are accepted too). SECURITY.md, "Bring your own PKI", has the rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SecurityConfig {
    /// A certificate's subject common name (exact) to the roles it grants.
    #[serde(alias = "cn_roles")]
    pub cn_roles: BTreeMap<String, Vec<String>>,
    /// A DNS subject alternative name (without regard to case) to the roles it grants.
    #[serde(alias = "dns_roles")]
    pub dns_roles: BTreeMap<String, Vec<String>>,
    /// A `store` certificate acts for one store only: the one it names
    /// (`meridian://store/<id>`), or the first one it registers, recorded durably.
    #[serde(alias = "bind_store_identity")]
    pub bind_store_identity: bool,
}

impl SecurityConfig {
    /// Every mapped name is a name and every role a role; the message names the entry.
    pub fn validate(&self) -> Result<(), String> {
        for (table, map) in [("cn-roles", &self.cn_roles), ("dns-roles", &self.dns_roles)] {
            for (name, roles) in map {
                if name.trim().is_empty() || name.trim() != name {
                    return Err(format!(
                        "security.{table}: {name:?} is not a name (empty, or with spaces around it)"
                    ));
                }
                if table == "dns-roles" && !name.is_ascii() {
                    return Err(format!(
                        "security.dns-roles: {name:?} is not a DNS name as certificates carry \
                         them (ASCII; write an internationalized name in its xn-- form)"
                    ));
                }
                if roles.is_empty() {
                    return Err(format!(
                        "security.{table}.{name:?} grants no role: give it one of client, store, \
                         admin, member, or remove it"
                    ));
                }
                if let Some(bad) = roles
                    .iter()
                    .find(|r| crate::auth::Role::of_name(r).is_none())
                {
                    return Err(format!(
                        "security.{table}.{name:?}: {bad:?} is no role (client, store, admin or \
                         member)"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Test hooks, all off by default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DebugConfig {
    /// Expose `POST /api/v1/debug/clock/shift/{ms}` to move this node's TSO clock.
    pub clock_injection: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ElectionConfig {
    /// TTL of the leader's etcd lease; keepalives go out every third of it.
    pub lease_ttl_secs: i64,
    /// Subtracted from every lease proof to cover clock-rate drift between node and etcd.
    pub safety_margin_ms: u64,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            lease_ttl_secs: 3,
            safety_margin_ms: 500,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// How often the control thread moves the TSO physical time to the clock.
    pub tick_interval_ms: u64,
    /// Bidirectional streams one client connection may hold open at once. quinn sets up
    /// state for every stream a peer may open when the connection starts, so this is also a
    /// cost per handshake: 4096 made a flood of handshakes take 1.5x the CPU of 1024
    /// (tuning.md, "Under attack").
    pub max_streams_per_connection: u32,
    /// Bytes a client may have in flight on one stream before it must wait for the server to
    /// read (QUIC stream flow control).
    pub stream_receive_window: u32,
    /// Bytes a client may have in flight on one connection, all streams together: with the
    /// stream window, what bounds the buffers one connection can make the server hold.
    pub connection_receive_window: u32,
    /// Connections one core holds at once; more are refused (a client tries another core's
    /// 4-tuple or member).
    pub max_connections_per_core: u32,
    /// Handshakes in progress on a core above which a client must first prove its address
    /// with a QUIC Retry (one extra round trip), so a spoofed-source flood cannot make the
    /// server do handshake work for addresses that will never answer. 0: always.
    pub retry_above_handshakes: u32,
    /// Handshakes one core starts per second (a burst of one second's worth); more are
    /// refused before any cryptography, so a flood of handshakes takes a bounded share of
    /// the core that also answers TSO requests. 0: no limit.
    pub handshakes_per_sec: u32,
    /// A connection with nothing sent either way for this long is closed (the negotiated
    /// value is the smaller of both sides'; clients keep theirs alive with pings).
    pub idle_timeout_ms: u32,
    /// How long shutdown waits for in-flight requests before closing connections.
    pub shutdown_grace_ms: u64,
    /// Pin each core's thread to one CPU. Right on a dedicated machine; on one shared with
    /// other busy processes, unpinned threads can move to an idle CPU instead of waiting.
    pub pin_cores: bool,
    /// Steer each datagram to a core by the connection id the core issued, and a new
    /// connection to the core pinned to the CPU it arrived on (a classic BPF program on the
    /// reuseport group). Off, the kernel spreads connections by a hash of their addresses, and
    /// two connections share a core as often as not.
    pub steer_connections: bool,
    /// Largest UDP payload a QUIC datagram may have, in and out (1200..=65527). Path MTU
    /// discovery finds what the network carries below it; lower it only for a path that loses
    /// large datagrams without failing the discovery probes.
    pub max_udp_payload: u16,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            tick_interval_ms: 1,
            max_streams_per_connection: 1024,
            stream_receive_window: 1 << 20,
            connection_receive_window: 16 << 20,
            max_connections_per_core: 4096,
            retry_above_handshakes: 64,
            handshakes_per_sec: 200,
            idle_timeout_ms: 30_000,
            shutdown_grace_ms: 2_000,
            pin_cores: true,
            steer_connections: true,
            max_udp_payload: datagram::MAX_UDP_PAYLOAD,
        }
    }
}

impl Config {
    pub fn load(path: Option<&Path>) -> anyhow::Result<Config> {
        let config: Config = match path {
            None => Config::default(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("reading config {}: {e}", path.display()))?;
                toml::from_str(&text)
                    .map_err(|e| anyhow::anyhow!("config {}: {e}", path.display()))?
            }
        };
        config.tso.validate()?;
        config.limits.validate().map_err(anyhow::Error::msg)?;
        config.security.validate().map_err(anyhow::Error::msg)?;
        if config.election.lease_ttl_secs < 1
            || config.election.safety_margin_ms >= config.election.lease_ttl_secs as u64 * 1000
        {
            anyhow::bail!(
                "election.lease_ttl_secs must be >= 1 and exceed election.safety_margin_ms"
            );
        }
        if !(datagram::MIN_UDP_PAYLOAD..=datagram::MAX_UDP_PAYLOAD)
            .contains(&config.server.max_udp_payload)
        {
            anyhow::bail!(
                "server.max_udp_payload must be within {}..={}",
                datagram::MIN_UDP_PAYLOAD,
                datagram::MAX_UDP_PAYLOAD
            );
        }
        if config.server.tick_interval_ms == 0 {
            anyhow::bail!("server.tick_interval_ms must be at least 1");
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_file_keeps_other_defaults_and_unknown_fields_fail() {
        let c: Config = toml::from_str("[tso]\nwindow_ms = 5000\n").unwrap();
        assert_eq!(c.tso.window_ms, 5000);
        assert_eq!(c.tso.max_lead_ms, WindowConfig::default().max_lead_ms);
        assert!(toml::from_str::<Config>("[tso]\nwindow = 1\n").is_err());
    }

    #[test]
    fn security_maps_names_to_known_roles_and_says_which_entry_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("meridian.toml");
        let load = |text: &str| {
            std::fs::write(&file, text).unwrap();
            Config::load(Some(&file))
        };
        let ok = load(
            "[security]\nbind-store-identity = true\n\
             [security.cn-roles]\ntikv = [\"store\"]\n\"tidb-server\" = [\"client\", \"admin\"]\n\
             [security.dns-roles]\n\"ops.example.com\" = [\"admin\"]\n",
        )
        .unwrap();
        assert!(ok.security.bind_store_identity);
        assert_eq!(ok.security.cn_roles["tikv"], vec!["store".to_string()]);
        assert_eq!(ok.security.dns_roles.len(), 1);
        // The snake_case spelling the other sections use reads the same.
        let snake = load("[security]\nbind_store_identity = true\n").unwrap();
        assert!(snake.security.bind_store_identity);
        for (text, says) in [
            (
                "[security.cn-roles]\ntikv = [\"stor\"]\n",
                "\"stor\" is no role",
            ),
            ("[security.cn-roles]\ntikv = []\n", "grants no role"),
            (
                "[security.dns-roles]\n\" \" = [\"store\"]\n",
                "is not a name",
            ),
            (
                "[security.dns-roles]\n\"bücher.de\" = [\"store\"]\n",
                "xn--",
            ),
            (
                "[security]\ncert-allowed-cn = [\"tikv\"]\n",
                "unknown field",
            ),
        ] {
            let err = load(text).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
        assert_eq!(
            Config::load(None).unwrap().security,
            SecurityConfig::default()
        );
    }

    #[test]
    fn udp_payload_outside_what_quic_allows_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("meridian.toml");
        for (payload, ok) in [(1199, false), (1200, true), (65527, true), (65535, false)] {
            std::fs::write(&file, format!("[server]\nmax_udp_payload = {payload}\n")).unwrap();
            let loaded = Config::load(Some(&file));
            assert_eq!(
                loaded.is_ok(),
                ok,
                "max_udp_payload = {payload}: {loaded:?}"
            );
        }
        assert_eq!(
            Config::load(None).unwrap().server.max_udp_payload,
            datagram::MAX_UDP_PAYLOAD
        );
    }
}
