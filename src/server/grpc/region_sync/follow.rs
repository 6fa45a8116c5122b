//! A follower's end of the region syncer: while another member leads, keep this member's
//! range index a copy of the leader's, from a snapshot and then the leader's change log, and
//! say how close the copy is (`PlacementState::sync`). Resumes from where it stopped when the
//! same leader's log still holds that index, and starts again from a snapshot otherwise. With
//! a copy on disk (`placement::region_copy`) it starts from the copy it loads and marks what it
//! applies for the copy's persister; a loaded copy answers no read until the stream confirms it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper_util::rt::TokioIo;
use tonic::transport::{Endpoint, Uri};

use super::{BATCH, SNAPSHOT_KEY, STREAM_KEY};
use crate::kvproto::pdpb::{self, pd_client::PdClient};
use crate::placement::Region;
use crate::proto::MemberInfo;
use crate::server::grpc::convert;
use crate::server::placement::region_copy::{self, CopyMarks, CopyStore, LogAt, Position};
use crate::server::Shared;

/// Between attempts to reach the leader.
const RETRY: Duration = Duration::from_millis(200);
/// Connecting to the leader (TCP and TLS) takes no longer than this.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How often a follower with no leader to follow looks again.
const LEADER_POLL: Duration = Duration::from_millis(50);

/// Where the copy stands: the leader's log stream and the next index wanted from it, and the
/// copy's own log position when it was left there (if anything else wrote the copy since, such
/// as a term of this member's own, it is not resumed).
#[derive(Clone, Copy)]
struct At {
    stream: u64,
    next: u64,
    local: (u64, u64),
}

/// Runs until the node stops: follows whoever leads, when it is another member. With
/// `copy_dir`, keeps the copy on disk there too, and starts from the one it holds.
pub async fn follow(shared: Arc<Shared>, tls: rustls::ClientConfig, copy_dir: Option<PathBuf>) {
    let mut tls = tls;
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
    let mut shutdown = shared.shutdown.clone();
    let marks = Arc::new(CopyMarks::default());
    let mut at: Option<At> = None;
    if let Some(dir) = copy_dir {
        if let Some(copy) = open_copy(&shared, dir, &marks, &mut at).await {
            let may = shared.clone();
            tokio::spawn(region_copy::persist(
                shared.placement.clone(),
                marks.clone(),
                copy,
                move || !may.membership.is_leader() && !may.placement.is_ready(),
                shared.shutdown.clone(),
            ));
        }
    }
    loop {
        let leader = match shared.membership.leader() {
            Some(l) if l.id != shared.membership.me.id && !l.grpc_url.is_empty() => l,
            _ => {
                tokio::select! {
                    _ = tokio::time::sleep(LEADER_POLL) => continue,
                    _ = shutdown.wait_for(|s| *s) => return,
                }
            }
        };
        let ended = tokio::select! {
            r = sync_with(&shared, &connector, &leader, &mut at, &marks) => r,
            _ = leader_changes(&shared, leader.id) => Ok(()),
            _ = shutdown.wait_for(|s| *s) => return,
        };
        shared.placement.sync.lost();
        if let Err(e) = ended {
            tracing::info!(leader = %leader.name, "region sync with the leader stopped: {e:#}");
        }
        tokio::select! {
            _ = tokio::time::sleep(RETRY) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}

/// Opens the copy on disk and loads it into the index, unless it is refused (the reason is
/// logged, and a snapshot replaces it) or this member leads already. Returns the store for the
/// persister; none when no store can be kept (logged: the member follows from memory alone).
async fn open_copy(
    shared: &Shared,
    dir: PathBuf,
    marks: &CopyMarks,
    at: &mut Option<At>,
) -> Option<CopyStore> {
    let started = std::time::Instant::now();
    let shown = dir.display().to_string();
    let cluster_id = shared.membership.cluster_id;
    let opened = tokio::task::spawn_blocking(move || CopyStore::open(&dir, cluster_id)).await;
    let (copy, loaded) = match opened {
        Ok(Ok(opened)) => opened,
        Ok(Err(e)) => {
            tracing::error!(dir = %shown, "no region copy is kept on disk: {e}");
            return None;
        }
        Err(e) => {
            tracing::error!(dir = %shown, "no region copy is kept on disk: {e}");
            return None;
        }
    };
    let loaded = match loaded {
        Ok(loaded) => loaded,
        Err(why) => {
            tracing::info!(dir = %shown, "region sync: the copy on disk is not used ({why}); a snapshot replaces it");
            return Some(copy);
        }
    };
    let state = &shared.placement;
    let _gate = state.sync.gate.lock().await;
    if shared.membership.is_leader() || state.is_ready() {
        return Some(copy);
    }
    let count = loaded.regions.len();
    let refused = state.index.reset(loaded.regions);
    // The leader's index never holds two regions over one key: a copy that does (refused, or
    // one displacing another) is not a state it held.
    if refused > 0 || state.index.len() != count {
        state.index.reset(Vec::new());
        tracing::warn!(
            dir = %shown,
            refused,
            "region sync: the copy on disk is not used (its regions overlap); a snapshot replaces it"
        );
        return Some(copy);
    }
    let local = state.index.log_position();
    marks.loaded(Position {
        at: loaded.at,
        local,
    });
    *at = Some(At {
        stream: loaded.at.stream,
        next: loaded.at.next,
        local,
    });
    // A copy a term may take over, as a snapshot's is; it answers reads only once the stream
    // confirms it (`sync.heard`).
    state.sync.copied();
    shared
        .metrics
        .sync_copies_loaded
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::info!(
        regions = count,
        stream = loaded.at.stream,
        next = loaded.at.next,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "region sync: the copy on disk loaded"
    );
    Some(copy)
}

async fn leader_changes(shared: &Shared, id: u64) {
    while shared.membership.leader().is_some_and(|l| l.id == id) {
        tokio::time::sleep(LEADER_POLL).await;
    }
}

async fn connect(
    connector: &tokio_rustls::TlsConnector,
    leader: &MemberInfo,
) -> anyhow::Result<PdClient<tonic::transport::Channel>> {
    let uri: Uri = leader.grpc_url.parse().context("the leader's gRPC URL")?;
    let authority = uri
        .authority()
        .context("the leader's gRPC URL names no host")?
        .to_string();
    let host = authority
        .rsplit_once(':')
        .map_or(authority.as_str(), |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let name = rustls::pki_types::ServerName::try_from(host)?;
    let connector = connector.clone();
    let addr = authority.clone();
    // TLS is done here, with this node's certificate (role `member`), as the HTTP API's
    // redirector does: tonic's own TLS takes PEM files, not the node's live config.
    let channel = Endpoint::from_shared(format!("http://{authority}"))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let (connector, addr, name) = (connector.clone(), addr.clone(), name.clone());
            async move {
                let tcp = tokio::net::TcpStream::connect(addr.as_str()).await?;
                tcp.set_nodelay(true)?;
                let tls = connector.connect(name, tcp).await?;
                Ok::<_, std::io::Error>(TokioIo::new(tls))
            }
        }))
        .await
        .with_context(|| format!("connecting to {authority}"))?;
    Ok(PdClient::new(channel).max_decoding_message_size(64 << 20))
}

/// One stream from the leader: returns when it ends (an error says why).
async fn sync_with(
    shared: &Shared,
    connector: &tokio_rustls::TlsConnector,
    leader: &MemberInfo,
    at: &mut Option<At>,
    marks: &CopyMarks,
) -> anyhow::Result<()> {
    let state = &shared.placement;
    let mut client = connect(connector, leader).await?;
    let resume = at.filter(|a| state.index.log_position() == a.local);
    let me = &shared.membership.me;
    let first = pdpb::SyncRegionRequest {
        header: Some(pdpb::RequestHeader {
            cluster_id: shared.membership.cluster_id,
            sender_id: me.id,
            ..Default::default()
        }),
        member: Some(pdpb::Member {
            name: me.name.clone(),
            member_id: me.id,
            client_urls: vec![me.grpc_url.clone()],
            ..Default::default()
        }),
        start_index: resume.map_or(0, |a| a.next),
    };
    // The request side stays open: the leader reads one request and the stream is its answer.
    let requests =
        tokio_stream::StreamExt::chain(tokio_stream::once(first), tokio_stream::pending());
    let mut request = tonic::Request::new(requests);
    request
        .metadata_mut()
        .insert(STREAM_KEY, resume.map_or(0, |a| a.stream).into());
    let response = client.sync_regions(request).await?;
    let stream = response
        .metadata()
        .get(STREAM_KEY)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .context("the leader named no log stream")?;
    let mut snapshot = response
        .metadata()
        .get(SNAPSHOT_KEY)
        .is_some()
        .then(Vec::new);
    let mut next = match (resume, &snapshot) {
        (Some(a), None) => a.next,
        (_, Some(_)) => 0,
        (None, None) => anyhow::bail!("the leader resumed a stream that was not asked for"),
    };
    let mut leader_next = next;
    // A stream resumed from an index (as a copy loaded from disk is) says nothing of how far
    // the leader's log runs past it until a message takes all the log held when the leader
    // read it: an empty one, or fewer records than a batch. Until then the copy is not heard
    // from, and answers no read.
    let mut confirmed = snapshot.is_some();
    let mut heard = false;
    let mut inbound = response.into_inner();
    while let Some(message) = inbound.message().await? {
        let regions = regions_of(&message)?;
        if let Some(buffer) = snapshot.as_mut() {
            if !regions.is_empty() {
                buffer.extend(regions);
                continue;
            }
            let whole = std::mem::take(buffer);
            snapshot = None;
            next = message.start_index;
            leader_next = next;
            let ids: Vec<u64> = whole.iter().map(|r| r.id).collect();
            write(shared, |index| {
                index.reset(whole);
                let local = index.log_position();
                marks.replaced(
                    ids,
                    Position {
                        at: LogAt { stream, next },
                        local,
                    },
                );
                Ok(())
            })
            .await?;
            state.sync.copied();
            shared
                .metrics
                .sync_snapshots
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(
                leader = %leader.name,
                regions = state.index.len(),
                next,
                "region sync: snapshot applied"
            );
        } else if regions.is_empty() {
            leader_next = message.start_index;
            confirmed = true;
        } else {
            if message.start_index != next {
                *at = None;
                anyhow::bail!("records from {} where {next} was next", message.start_index);
            }
            let n = regions.len() as u64;
            write(shared, |index| {
                let mut changed = Vec::with_capacity(regions.len());
                for result in index.apply_batch(regions) {
                    // The leader accepted these in this order from the same state: a refusal
                    // means the copy is not the leader's.
                    let change =
                        result.context("a record the leader applied does not apply here")?;
                    changed.push(change.route.id());
                    changed.extend(change.removed);
                }
                let at = LogAt {
                    stream,
                    next: next + n,
                };
                let local = index.log_position();
                marks.changed(changed, Position { at, local });
                Ok(())
            })
            .await
            .inspect_err(|_| *at = None)?;
            if message.published_after_unix_ms != 0 {
                let lag_ms = state
                    .clock
                    .now_ms()
                    .saturating_sub(message.published_after_unix_ms);
                shared.metrics.sync_lag(lag_ms, n);
            }
            next += n;
            leader_next = leader_next.max(next);
            confirmed |= n < BATCH as u64;
        }
        *at = Some(At {
            stream,
            next,
            local: state.index.log_position(),
        });
        if confirmed {
            if !heard {
                heard = true;
                tracing::info!(
                    leader = %leader.name,
                    next,
                    behind = leader_next.saturating_sub(next),
                    "region sync: following the leader's log"
                );
            }
            state.sync.heard(next, leader_next, state.clock.now_ms());
        }
    }
    anyhow::bail!("the leader ended the stream")
}

fn regions_of(message: &pdpb::SyncRegionResponse) -> anyhow::Result<Vec<Region>> {
    message
        .regions
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let leader = message.region_leaders.get(i).filter(|l| l.id != 0);
            convert::region_from(r, leader).map_err(|e| anyhow::anyhow!("{e}"))
        })
        .collect()
}

/// Writes the copy, unless this member leads now (its term's load owns the index then).
async fn write(
    shared: &Shared,
    edit: impl FnOnce(&crate::placement::RangeIndex) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let state = &shared.placement;
    let _gate = state.sync.gate.lock().await;
    if shared.membership.is_leader() || state.is_ready() {
        anyhow::bail!("this member leads now");
    }
    edit(&state.index)
}
