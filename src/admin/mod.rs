//! The admin HTTP server and what it reports: health, readiness, membership and Prometheus
//! metrics. It reads server state; it makes no serving decisions.

mod client;
mod http;
mod metrics;

pub use client::AdminClient;
pub use http::{serve, AdminState};
pub use metrics::{CoreMetrics, Metrics, RequestKind};
