//! The ReportBuckets client stream, and the buckets region lookups carry when they ask.

use super::*;

impl PdService {
    /// Reads reports until the store closes the stream, and answers only then (or when it is
    /// refused), as PD does. Not the leader, or another cluster's header: the stream ends with
    /// PD's status, so the store reconnects to the leader. Not bootstrapped: PD's header, and
    /// the stream ends. A report that is too large is dropped and the stream goes on, as PD
    /// drops a report it cannot take (a region it does not know). So is a report for a region
    /// the caller's store does not lead (bind-store-identity): refused before it touches the
    /// buckets held, counted, and the stream goes on (the store that leads it reports again).
    pub(super) async fn report_buckets(
        self: &Arc<Self>,
        request: GrpcRequest<Streaming<pdpb::ReportBucketsRequest>>,
    ) -> Result<GrpcResponse<pdpb::ReportBucketsResponse>, Status> {
        self.authorize(&request, Call::ReportBuckets)?;
        let caller = ConnectionGrants::caller_of(&request);
        let mut inbound = request.into_inner();
        let mut shutdown = self.shared.shutdown.clone();
        let answer = |header| Ok(GrpcResponse::new(pdpb::ReportBucketsResponse { header }));
        loop {
            let next = tokio::select! {
                next = inbound.message() => next?,
                _ = shutdown.wait_for(|s| *s) => return Err(Status::unavailable("shutting down")),
            };
            let Some(req) = next else {
                return answer(self.header());
            };
            self.check(req.header.as_ref())?;
            let buckets = req.buckets.as_ref().map(convert::buckets_from).unwrap_or(
                crate::placement::Buckets {
                    region_id: 0,
                    version: 0,
                    keys: Vec::new(),
                },
            );
            match self
                .call_as(&caller, Request::ReportBuckets { buckets })
                .await
            {
                Response::Ok(Reply::Done) => {}
                Response::Ok(other) => return Err(unexpected(other)),
                Response::Err(ErrorReply::LimitExceeded(why)) => {
                    self.metrics()
                        .error(&ErrorReply::LimitExceeded(why.clone()));
                    tracing::debug!("a bucket report was dropped: {why}");
                }
                // Counted by `call_as` already.
                Response::Err(ErrorReply::PermissionDenied(why)) => {
                    tracing::debug!("a bucket report was refused: {why}");
                }
                Response::Err(e) => return answer(self.refusal(e)?),
            }
        }
    }

    /// `reply` with the region's latest buckets, when the request asked for them and a region
    /// was found.
    pub(super) async fn with_buckets(
        &self,
        mut reply: pdpb::GetRegionResponse,
        need_buckets: bool,
    ) -> Result<pdpb::GetRegionResponse, Status> {
        if let Some(id) = reply.region.as_ref().map(|r| r.id).filter(|_| need_buckets) {
            reply.buckets = self.buckets_of(id).await?;
        }
        Ok(reply)
    }

    /// The latest buckets of region `id`, if any were reported.
    pub(super) async fn buckets_of(&self, id: u64) -> Result<Option<metapb::Buckets>, Status> {
        match self.call(Request::GetRegionBuckets { region_id: id }).await {
            Response::Ok(Reply::Buckets(found)) => Ok(found.as_ref().map(convert::buckets_to)),
            Response::Ok(other) => Err(unexpected(other)),
            // The region was just found: a refusal now (leadership lost meanwhile) leaves the
            // answer without buckets, as a PD that is no longer leader answers.
            Response::Err(_) => Ok(None),
        }
    }
}
