//! The RegionHeartbeat stream: heartbeats taken in batches to the shards, operators pushed back
//! on the stream for the region they concern: in reply to its heartbeat, or at once when the
//! patrol makes one (the stream is bound to each leader store it reports for, `push.rs`).

use super::*;

/// Most heartbeats taken from one stream before they are handed to the shards as one batch.
const HEARTBEAT_BATCH: usize = 256;

impl PdService {
    pub(super) async fn region_heartbeat(
        self: &Arc<Self>,
        request: GrpcRequest<Streaming<pdpb::RegionHeartbeatRequest>>,
    ) -> Result<GrpcResponse<Stream<pdpb::RegionHeartbeatResponse>>, Status> {
        self.authorize(&request, Call::RegionHeartbeat)?;
        let caller = ConnectionGrants::caller_of(&request);
        let inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(STREAM_BACKLOG);
        tokio::spawn(self.clone().heartbeat_stream(inbound, tx, caller));
        Ok(GrpcResponse::new(Box::pin(ReceiverStream::new(rx))))
    }

    /// Reads heartbeats as they come, hands whatever has arrived to the shards as one batch,
    /// and pushes an operator back on the stream for each region that got one.
    pub(super) async fn heartbeat_stream(
        self: Arc<Self>,
        mut inbound: Streaming<pdpb::RegionHeartbeatRequest>,
        tx: mpsc::Sender<Result<pdpb::RegionHeartbeatResponse, Status>>,
        caller: Caller,
    ) {
        let mut shutdown = self.shared.shutdown.clone();
        let mut push = self.shared.placement.pushes.open();
        loop {
            let next_batch = std::future::poll_fn(|cx| {
                let mut batch = Vec::new();
                loop {
                    match Pin::new(&mut inbound).poll_next(cx) {
                        Poll::Ready(Some(item)) => {
                            batch.push(item);
                            if batch.len() >= HEARTBEAT_BATCH {
                                return Poll::Ready((batch, false));
                            }
                        }
                        Poll::Ready(None) => return Poll::Ready((batch, true)),
                        Poll::Pending if batch.is_empty() => return Poll::Pending,
                        Poll::Pending => return Poll::Ready((batch, false)),
                    }
                }
            });
            let next = tokio::select! {
                next = next_batch => Ok(next),
                Some(pushed) = push.rx.recv() => Err(pushed),
                _ = shutdown.wait_for(|s| *s) => return,
            };
            let (batch, ended) = match next {
                Ok(next) => next,
                Err((region, op)) => {
                    let v2 = self.conf_change_v2();
                    let Some(mut resp) = convert::operator_to(&region, &op, v2) else {
                        continue;
                    };
                    resp.header = self.header();
                    if tx.send(Ok(resp)).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            let mut items: Vec<(Region, RegionStats)> = Vec::with_capacity(batch.len());
            for item in batch {
                let req = match item {
                    Ok(req) => req,
                    Err(status) => {
                        tracing::debug!("region heartbeat stream ended: {status}");
                        return;
                    }
                };
                if let Err(status) = self.check(req.header.as_ref()) {
                    let _ = tx.send(Err(status)).await;
                    return;
                }
                let Some(region_pb) = req.region.as_ref() else {
                    let _ = tx
                        .send(Err(Status::invalid_argument("heartbeat without a region")))
                        .await;
                    return;
                };
                match convert::region_from(region_pb, req.leader.as_ref()) {
                    Ok(region) => {
                        let stats = convert::region_stats_from(&req, &region);
                        items.push((region, stats));
                    }
                    Err(e) => {
                        let _ = tx.send(Err(bad(e))).await;
                        return;
                    }
                }
            }
            if !items.is_empty() && !self.beat(items, &caller, &tx, Some(&mut push)).await {
                return;
            }
            if ended {
                return;
            }
        }
    }

    /// One batch through the service; false when the stream is to end. Each heartbeat is
    /// checked against the store the caller speaks for (bind-store-identity) on its own: a
    /// refused one is answered with PD's error header and the rest go on. An accepted one
    /// binds `push` to its leader's store, so a refused one cannot take another store's pushes.
    pub(super) async fn beat(
        &self,
        items: Vec<(Region, RegionStats)>,
        caller: &Caller,
        tx: &mpsc::Sender<Result<pdpb::RegionHeartbeatResponse, Status>>,
        mut push: Option<&mut PushStream>,
    ) -> bool {
        let regions: Vec<Region> = items.iter().map(|(r, _)| r.clone()).collect();
        let mut batch: Vec<_> = items
            .into_iter()
            .map(|(region, stats)| {
                let op = Op::Placement(PlacementOp::Heartbeat(Box::new(region), stats));
                admit_store(op, caller, &self.shared)
            })
            .collect();
        let mut replies = Vec::with_capacity(batch.len());
        execute_batch(
            &mut batch,
            &mut replies,
            &mut BatchRoom::default(),
            &self.shared,
            None,
            self.metrics(),
        )
        .await;
        for (region, reply) in regions.iter().zip(replies) {
            if let (Response::Ok(_), Some(push), Some(leader)) =
                (&reply, push.as_deref_mut(), region.leader_peer())
            {
                push.bind(leader.store_id);
            }
            let answer = match reply {
                Response::Ok(Reply::RegionHeartbeat { operator: Some(op) }) => {
                    let Some(mut resp) = convert::operator_to(region, &op, self.conf_change_v2())
                    else {
                        continue;
                    };
                    resp.header = self.header();
                    Ok(resp)
                }
                Response::Ok(_) => continue,
                // A stale or malformed report changes nothing (P1), nor does one for a region
                // led on a store the certificate does not speak for. PD answers it with an
                // UNKNOWN error header addressed to the reporting leader, and the stream goes on.
                Response::Err(
                    e @ (ErrorReply::StaleEpoch(_)
                    | ErrorReply::InvalidArgument(_)
                    | ErrorReply::PermissionDenied(_)),
                ) => {
                    let m = e.to_string();
                    tracing::debug!(region = region.id, "region heartbeat refused: {m}");
                    Ok(pdpb::RegionHeartbeatResponse {
                        header: self.error_header(pdpb::ErrorType::Unknown, m),
                        region_id: region.id,
                        target_peer: convert::leader_to(region),
                        ..Default::default()
                    })
                }
                // Not leader, not bootstrapped, unavailable: PD answers once, with the header or
                // the status, and closes the stream; the store reconnects.
                Response::Err(e) => {
                    let refusal = match self.refusal(e) {
                        Ok(header) => Ok(pdpb::RegionHeartbeatResponse {
                            header,
                            ..Default::default()
                        }),
                        Err(status) => Err(status),
                    };
                    let _ = tx.send(refusal).await;
                    return false;
                }
            };
            if tx.send(answer).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Whether steps go to TiKV as `ChangePeerV2`: PD reads the cluster version as it sends
    /// each step, and so does this, from the stores' latest view.
    fn conf_change_v2(&self) -> bool {
        self.shared.placement.view.load().conf_change_v2()
    }
}
