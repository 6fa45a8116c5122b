//! The Tso stream: each request's count from the one allocator, the reply carrying the last timestamp of the batch, as PD does.

use super::*;

impl PdService {
    pub(super) async fn tso(
        self: &Arc<Self>,
        request: GrpcRequest<Streaming<pdpb::TsoRequest>>,
    ) -> Result<GrpcResponse<Stream<pdpb::TsoResponse>>, Status> {
        self.authorize(&request, Call::Tso)?;
        Ok(GrpcResponse::new(answer_each(
            self.clone(),
            request.into_inner(),
            "tso",
            |this, req| async move { this.tso_one(&req).await },
        )))
    }

    /// One TSO request: `count` timestamps, answered with the last of them as PD does.
    pub(super) async fn tso_one(
        &self,
        req: &pdpb::TsoRequest,
    ) -> Result<pdpb::TsoResponse, Status> {
        self.check(req.header.as_ref())?;
        if req.count == 0 || req.count > MAX_COUNT {
            return Err(Status::invalid_argument(format!(
                "tso count {} outside 1..={MAX_COUNT}",
                req.count
            )));
        }
        // PD never splits one batch across two physical milliseconds, and clients rebuild the
        // first timestamp as `last.logical - count + 1` within one: a range that carried into
        // the next millisecond is skipped (never handed out again, T1) and asked for anew.
        for _ in 0..4 {
            match execute(Op::Tso(req.count), &self.shared, self.metrics()).await {
                Response::Ok(Reply::Tso { first, count }) => {
                    let first = Timestamp::from_u64(first);
                    let last = Timestamp::from_u64(first.as_u64() + u64::from(count) - 1);
                    if first.physical_ms() != last.physical_ms() {
                        continue;
                    }
                    return Ok(pdpb::TsoResponse {
                        header: self.header(),
                        count,
                        timestamp: Some(pdpb::Timestamp {
                            physical: last.physical_ms() as i64,
                            logical: last.logical() as i64,
                            suffix_bits: 0,
                        }),
                    });
                }
                Response::Ok(other) => return Err(unexpected(other)),
                Response::Err(e) => {
                    return Err(match self.refusal(e) {
                        Err(status) => status,
                        Ok(_) => Status::unavailable("tso not available"),
                    })
                }
            }
        }
        Err(Status::unavailable(
            "tso batch kept crossing a millisecond; retry",
        ))
    }
}
