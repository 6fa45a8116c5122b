//! `loadgen token-buckets`: AcquireTokenBuckets load on the leader's `ResourceManager`, as
//! TiDB's resource-group controllers put it: `--streams` streams (spread over `--connections`
//! HTTP/2 connections), each keeping `--depth` messages in flight, each message asking for
//! tokens for `--groups` groups. A grant is one `TokenBucketRequest` for one group answered;
//! the report gives grants per second, how many were short of what was asked, and the
//! latency of a message's round trip. Against `--endpoints`, or a local demo server (the
//! release `meridian` beside loadgen) when none are given.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use meridian::kvproto::pdpb;
use meridian::kvproto::resource_manager::{
    resource_manager_client::ResourceManagerClient, token_bucket_request, GroupMode,
    GroupRequestUnitSettings, PutResourceGroupRequest, RequestUnitItem, RequestUnitType,
    ResourceGroup, TokenBucket, TokenBucketRequest, TokenBucketsRequest, TokenLimitSettings,
};
use meridian::pd_grpc;
use meridian::tls::Trust;
use serde::Serialize;
use tokio::sync::mpsc;
use tonic::transport::Channel;

use crate::demo::{DemoServer, ServerSetup};
use crate::report::Latency;

#[derive(Debug, Clone, clap::Args)]
pub struct TokenBucketArgs {
    /// Members' client addresses, host:port; none starts a local demo server.
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Vec<String>,
    /// The server's certificate or CA (DATA_DIR/tls/ca.pem), with `--endpoints`.
    #[arg(long)]
    pub ca: Option<PathBuf>,
    #[arg(long, default_value = "10s", value_parser = crate::duration::parse)]
    pub duration: Duration,
    #[arg(long, default_value_t = 16)]
    pub streams: usize,
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// Messages in flight per stream.
    #[arg(long, default_value_t = 4)]
    pub depth: usize,
    /// Groups each message asks for (`loadgen-0`..; added before the run).
    #[arg(long, default_value_t = 8)]
    pub groups: usize,
    /// The groups' fill rate (RU/s).
    #[arg(long, default_value_t = 1_000_000)]
    pub fill_rate: u64,
    /// The groups' burst limit (-1: unlimited, PD's convention).
    #[arg(long, default_value_t = -1)]
    pub burst_limit: i64,
    /// RU each group request asks for.
    #[arg(long, default_value_t = 10.0)]
    pub ru: f64,
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub server: ServerSetup,
}

#[derive(Debug, Clone, Serialize)]
pub struct TokenBucketReport {
    pub duration_s: f64,
    pub streams: usize,
    pub groups_per_message: usize,
    pub grants: u64,
    pub grants_per_sec: f64,
    pub messages_per_sec: f64,
    /// Grants of fewer tokens than asked (the groups' buckets ran short).
    pub short_grants: u64,
    /// Round trip of one message.
    pub latency_us: Latency,
    pub errors: u64,
}

impl TokenBucketReport {
    pub fn print(&self) {
        println!(
            "token-buckets: {} grants in {:.1}s = {:.0} grants/s ({:.0} messages/s of {} groups, {} streams), {} short, {} errors",
            self.grants,
            self.duration_s,
            self.grants_per_sec,
            self.messages_per_sec,
            self.groups_per_message,
            self.streams,
            self.short_grants,
            self.errors
        );
        println!(
            "round trip us: p50 {:.0} p99 {:.0} p99.9 {:.0} max {:.0}",
            self.latency_us.p50, self.latency_us.p99, self.latency_us.p999, self.latency_us.max
        );
    }
}

/// What one stream counted.
#[derive(Default)]
struct Tally {
    grants: u64,
    short: u64,
    messages: u64,
    errors: u64,
}

fn group(name: String, fill_rate: u64, burst_limit: i64) -> ResourceGroup {
    ResourceGroup {
        name,
        mode: GroupMode::RuMode as i32,
        r_u_settings: Some(GroupRequestUnitSettings {
            r_u: Some(TokenBucket {
                settings: Some(TokenLimitSettings {
                    fill_rate,
                    burst_limit,
                    max_tokens: 0.0,
                }),
                tokens: 0.0,
            }),
        }),
        priority: 8,
        ..Default::default()
    }
}

/// The message every stream sends: one RU request for each group.
fn message(groups: &[String], ru: f64, client: u64) -> TokenBucketsRequest {
    TokenBucketsRequest {
        requests: groups
            .iter()
            .map(|name| TokenBucketRequest {
                resource_group_name: name.clone(),
                request: Some(token_bucket_request::Request::RuItems(
                    token_bucket_request::RequestRu {
                        request_r_u: vec![RequestUnitItem {
                            r#type: RequestUnitType::Ru as i32,
                            value: ru,
                        }],
                    },
                )),
                ..Default::default()
            })
            .collect(),
        target_request_period_ms: 5000,
        client_unique_id: client,
    }
}

/// The leader's gRPC address, asked of the endpoints in turn.
async fn leader(endpoints: &[String], trust: &Trust) -> anyhow::Result<String> {
    let mut last_error = anyhow::anyhow!("no endpoints");
    for endpoint in endpoints {
        let asked = async {
            let mut pd = pd_grpc::connect(endpoint, trust).await?;
            let members = pd
                .get_members(pdpb::GetMembersRequest::default())
                .await?
                .into_inner();
            let url = members
                .leader
                .and_then(|l| l.client_urls.into_iter().next())
                .ok_or_else(|| anyhow::anyhow!("{endpoint} knows no leader"))?;
            anyhow::Ok(
                url.trim_start_matches("https://")
                    .trim_start_matches("http://")
                    .to_string(),
            )
        };
        match asked.await {
            Ok(addr) => return Ok(addr),
            Err(e) => last_error = e,
        }
    }
    Err(last_error)
}

/// One stream until `deadline`: `depth` messages kept in flight, each answer counted.
async fn drive(
    channel: Channel,
    request: TokenBucketsRequest,
    (depth, ru): (usize, f64),
    deadline: Instant,
) -> (Tally, Histogram<u64>) {
    let mut tally = Tally::default();
    let mut rtt = Histogram::<u64>::new(3).expect("a histogram");
    let (send, requests) = mpsc::channel(depth);
    let mut rm = ResourceManagerClient::new(channel);
    let mut in_flight = VecDeque::with_capacity(depth);
    for _ in 0..depth {
        in_flight.push_back(Instant::now());
        let _ = send.send(request.clone()).await;
    }
    let mut replies = match rm
        .acquire_token_buckets(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
    {
        Ok(replies) => replies.into_inner(),
        Err(status) => {
            tracing::warn!("AcquireTokenBuckets refused: {status}");
            tally.errors += 1;
            return (tally, rtt);
        }
    };
    while let Some(sent) = in_flight.pop_front() {
        match replies.message().await {
            Ok(Some(reply)) => {
                let _ = rtt.record(sent.elapsed().as_nanos() as u64);
                tally.messages += 1;
                for r in &reply.responses {
                    for g in &r.granted_r_u_tokens {
                        tally.grants += 1;
                        let tokens = g.granted_tokens.as_ref().map_or(0.0, |t| t.tokens);
                        if tokens < ru {
                            tally.short += 1;
                        }
                    }
                }
            }
            Ok(None) => break,
            Err(status) => {
                tracing::warn!("AcquireTokenBuckets stream ended: {status}");
                tally.errors += 1;
                break;
            }
        }
        if Instant::now() < deadline {
            in_flight.push_back(Instant::now());
            if send.send(request.clone()).await.is_err() {
                break;
            }
        }
    }
    (tally, rtt)
}

pub async fn run(args: &TokenBucketArgs) -> anyhow::Result<TokenBucketReport> {
    let demo = if args.endpoints.is_empty() {
        Some(DemoServer::start(&args.server).await?)
    } else {
        None
    };
    let (endpoints, trust) = match &demo {
        Some(d) => (vec![d.server.client_addr.clone()], Trust::Ca(d.ca.clone())),
        None => {
            let Some(ca) = &args.ca else {
                anyhow::bail!("pass --ca FILE (the server's DATA_DIR/tls/ca.pem) with --endpoints");
            };
            (args.endpoints.clone(), Trust::Ca(ca.clone()))
        }
    };
    let report = measure(args, &endpoints, &trust).await;
    if let Some(demo) = demo {
        demo.stop().await?;
    }
    report
}

async fn measure(
    args: &TokenBucketArgs,
    endpoints: &[String],
    trust: &Trust,
) -> anyhow::Result<TokenBucketReport> {
    let addr = leader(endpoints, trust).await?;
    let mut channels = Vec::new();
    for _ in 0..args.connections.max(1) {
        channels.push(pd_grpc::channel(&addr, trust).await?);
    }
    let names: Vec<String> = (0..args.groups.max(1))
        .map(|i| format!("loadgen-{i}"))
        .collect();
    let mut rm = ResourceManagerClient::new(channels[0].clone());
    let started = Instant::now();
    for name in &names {
        // The leader may still be loading its term: retry a little.
        loop {
            let put = PutResourceGroupRequest {
                group: Some(group(name.clone(), args.fill_rate, args.burst_limit)),
            };
            match rm.add_resource_group(put).await {
                Ok(_) => break,
                Err(s) if started.elapsed() < Duration::from_secs(10) => {
                    tracing::debug!("adding {name}: {s}; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(s) => anyhow::bail!("adding resource group {name}: {s}"),
            }
        }
    }
    let start = Instant::now();
    let deadline = start + args.duration;
    let mut streams = tokio::task::JoinSet::new();
    for i in 0..args.streams.max(1) {
        let channel = channels[i % channels.len()].clone();
        let request = message(&names, args.ru, i as u64 + 1);
        streams.spawn(drive(
            channel,
            request,
            (args.depth.max(1), args.ru),
            deadline,
        ));
    }
    let mut total = Tally::default();
    let mut rtt = Histogram::<u64>::new(3)?;
    while let Some(done) = streams.join_next().await {
        let (tally, h) = done?;
        total.grants += tally.grants;
        total.short += tally.short;
        total.messages += tally.messages;
        total.errors += tally.errors;
        rtt.add(&h)?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let report = TokenBucketReport {
        duration_s: elapsed,
        streams: args.streams.max(1),
        groups_per_message: names.len(),
        grants: total.grants,
        grants_per_sec: total.grants as f64 / elapsed,
        messages_per_sec: total.messages as f64 / elapsed,
        short_grants: total.short,
        latency_us: Latency::of(&rtt),
        errors: total.errors,
    };
    Ok(report)
}

/// Runs, prints, and writes `--json`; the streams that failed count as violations, so a run
/// that lost some does not pass for a measurement.
pub async fn run_and_report(args: &TokenBucketArgs) -> anyhow::Result<u64> {
    let report = run(args).await?;
    report.print();
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(report.errors)
}
