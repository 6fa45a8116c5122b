//! The admin HTTP server and what it reports: health, readiness, membership and Prometheus
//! metrics. It reads server state; it makes no serving decisions.

mod client;
mod http;
mod leadership;
mod metrics;

pub use client::AdminClient;
pub use http::{serve, AdminControl, AdminState};
pub use metrics::{CoreMetrics, Metrics, PlacementGauges, RequestKind, StoreCounts};
