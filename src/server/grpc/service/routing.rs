//! Routing: GetRegion, GetPrevRegion, GetRegionByID, QueryRegion, ScanRegions and BatchScanRegions.

use super::*;

impl PdService {
    pub(super) async fn get_region(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetRegionRequest>,
    ) -> Result<GrpcResponse<pdpb::GetRegionResponse>, Status> {
        let need_buckets = request.get_ref().need_buckets;
        self.one_region(request, Call::GetRegion, need_buckets, |req| {
            Request::GetRegion {
                key: req.region_key,
            }
        })
        .await
    }

    pub(super) async fn get_prev_region(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetRegionRequest>,
    ) -> Result<GrpcResponse<pdpb::GetRegionResponse>, Status> {
        let need_buckets = request.get_ref().need_buckets;
        self.one_region(request, Call::GetPrevRegion, need_buckets, |req| {
            Request::GetPrevRegion {
                key: req.region_key,
            }
        })
        .await
    }

    pub(super) async fn get_region_by_id(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetRegionByIdRequest>,
    ) -> Result<GrpcResponse<pdpb::GetRegionResponse>, Status> {
        let need_buckets = request.get_ref().need_buckets;
        self.one_region(request, Call::GetRegionById, need_buckets, |req| {
            Request::GetRegionById { id: req.region_id }
        })
        .await
    }

    /// A lookup answered with one region (GetRegion, GetPrevRegion, GetRegionByID), and its
    /// latest buckets when the request asks for them.
    async fn one_region<Q: PdRequest>(
        &self,
        request: GrpcRequest<Q>,
        call: Call,
        need_buckets: bool,
        lookup: impl FnOnce(Q) -> Request,
    ) -> Result<GrpcResponse<pdpb::GetRegionResponse>, Status> {
        let handle = FollowerHandle::of(&request);
        let mut reply = self
            .unary_read(
                request,
                call,
                handle,
                |req| Ok(lookup(req)),
                PdService::region_reply,
            )
            .await?
            .into_inner();
        if self.by_follower(handle) {
            // PD's follower answers a key it holds no region for with REGION_NOT_FOUND, and
            // keeps no buckets.
            if reply.region.is_none() && reply.header.as_ref().is_some_and(|h| h.error.is_none()) {
                reply.header = self.region_not_found();
            }
            return Ok(GrpcResponse::new(reply));
        }
        Ok(GrpcResponse::new(
            self.with_buckets(reply, need_buckets).await?,
        ))
    }

    /// The router client's batched lookups (keys, previous keys and ids in one message), one
    /// response per request message; see `query_one`.
    pub(super) async fn query_region(
        self: &Arc<Self>,
        request: GrpcRequest<Streaming<pdpb::QueryRegionRequest>>,
    ) -> Result<GrpcResponse<Stream<pdpb::QueryRegionResponse>>, Status> {
        self.authorize(&request, Call::QueryRegion)?;
        Ok(GrpcResponse::new(answer_each(
            self.clone(),
            request.into_inner(),
            "query region",
            move |this, req| async move { this.query_one(req).await },
        )))
    }

    pub(super) async fn scan_regions(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::ScanRegionsRequest>,
    ) -> Result<GrpcResponse<pdpb::ScanRegionsResponse>, Status> {
        let handle = FollowerHandle::of(&request);
        self.unary_read(
            request,
            Call::ScanRegions,
            handle,
            |req| {
                Ok(Request::ScanRegions {
                    start: req.start_key,
                    end: req.end_key,
                    limit: u32::try_from(req.limit.max(0)).unwrap_or(u32::MAX),
                })
            },
            |_, reply| match reply {
                Reply::Regions(regions) => Ok(pdpb::ScanRegionsResponse {
                    region_metas: regions.iter().map(convert::region_to).collect(),
                    leaders: regions
                        .iter()
                        .map(|r| convert::leader_to(r).unwrap_or_default())
                        .collect(),
                    regions: regions.iter().map(PdService::scan_entry).collect(),
                    ..Default::default()
                }),
                other => Err(unexpected(other)),
            },
        )
        .await
    }

    pub(super) async fn batch_scan_regions(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::BatchScanRegionsRequest>,
    ) -> Result<GrpcResponse<pdpb::BatchScanRegionsResponse>, Status> {
        let handle = FollowerHandle::of(&request);
        self.authorize(&request, Call::ScanRegions)?;
        let req = request.into_inner();
        let by_follower = self.check_role(req.header.as_ref(), handle)?;
        // PD reads a limit of 0 as "no limit"; here it is the most one answer carries, so a
        // million-region map cannot be asked for in one message.
        let mut limit = match u32::try_from(req.limit) {
            Ok(n) if n > 0 => n.min(MAX_BATCH_SCAN_REGIONS),
            _ => MAX_BATCH_SCAN_REGIONS,
        };
        let mut out: Vec<Region> = Vec::new();
        let mut last_end: Option<Vec<u8>> = None;
        for range in &req.ranges {
            if !range.end_key.is_empty() && range.end_key < range.start_key {
                return Err(Status::invalid_argument(
                    "a range's end key is before its start key",
                ));
            }
            // PD requires the ranges in order and apart; an overlap would answer a region twice.
            if let Some(prev_end) = &last_end {
                if prev_end.is_empty() || range.start_key < *prev_end {
                    return Err(Status::invalid_argument(
                        "ranges overlap or are out of order",
                    ));
                }
            }
            last_end = Some(range.end_key.clone());
            let mut start = range.start_key.clone();
            // One range may cover more regions than one scan answers: continue from the last end.
            while limit > 0 {
                let scan = Op::of(Request::ScanRegions {
                    start: start.clone(),
                    end: range.end_key.clone(),
                    limit: limit.min(crate::proto::MAX_SCAN_REGIONS),
                });
                let scan = if by_follower {
                    scan.allowing_follower()
                } else {
                    scan
                };
                let response = execute(scan, &self.shared, self.metrics()).await;
                if by_follower && matches!(response, Response::Err(ErrorReply::NotLeader { .. })) {
                    return Ok(GrpcResponse::new(pdpb::BatchScanRegionsResponse {
                        header: self.region_not_found(),
                        ..Default::default()
                    }));
                }
                let got = match self.answer(response)? {
                    Ok(Reply::Regions(regions)) => regions,
                    Ok(other) => return Err(unexpected(other)),
                    Err(header) => {
                        return Ok(GrpcResponse::new(pdpb::BatchScanRegionsResponse {
                            header,
                            ..Default::default()
                        }))
                    }
                };
                let Some(last) = got.last() else { break };
                let next = last.end_key.clone();
                limit -= got.len() as u32;
                for r in got {
                    if out.last().is_none_or(|p| p.id != r.id) {
                        out.push(r);
                    }
                }
                // A page may be short because of its size, not only because the range ran
                // out: go on until the range or the key space ends.
                if next.is_empty() || (!range.end_key.is_empty() && next >= range.end_key) {
                    break;
                }
                start = next;
            }
        }
        Ok(GrpcResponse::new(pdpb::BatchScanRegionsResponse {
            header: self.header(),
            regions: out.iter().map(PdService::scan_entry).collect(),
        }))
    }

    /// One `QueryRegion` message, answered as PD does (tikv/pd server/grpc_service.go
    /// `QueryRegion`; pkg/core/region.go `QueryRegions`): `key_id_map` and `prev_key_id_map`
    /// hold, in request order, the id of the region holding each key (of the region just before
    /// it, adjacent, for each previous key), or 0 when there is none; `regions_by_id` holds each
    /// region found once, and an entry for every requested id not found (PD's nil entry); with
    /// `need_buckets`, each region found carries its latest buckets.
    async fn query_one(
        &self,
        req: pdpb::QueryRegionRequest,
    ) -> Result<pdpb::QueryRegionResponse, Status> {
        // PD checks the cluster id of every message first; a mismatch ends the stream.
        self.check_cluster(req.header.as_ref())?;
        let state = &self.shared.placement;
        let by_follower = !self.shared.membership.is_leader();
        if by_follower && !state.sync.serves_reads(state.clock.now_ms()) {
            // A PD follower answers QueryRegion from the regions its region syncer copied,
            // whether or not the caller sent the follower key, and with REGION_NOT_FOUND in
            // the header while the syncer is not running; so does a Meridian follower that is
            // not in sync, and the stream goes on (the client asks the members for the leader
            // and reconnects).
            return Ok(self.query_refused(self.region_not_found()));
        }
        let sorted = |op: RouteOp| {
            let op = Op::Placement(PlacementOp::Routing(op));
            if by_follower {
                op.allowing_follower()
            } else {
                op
            }
        };
        // The keys from one snapshot, then the previous keys, through the service's batch;
        // placement that does not serve reads says why in each answer (PD's leader answers a
        // cluster not bootstrapped with NOT_BOOTSTRAPPED). A follower searches its copy for
        // the keys together too (`locate_many_from_copy`), so that its CPU per lookup is the
        // leader's.
        let mut found = Vec::with_capacity(req.keys.len() + req.prev_keys.len());
        if by_follower {
            match locate_many_from_copy(&self.shared, &req.keys, self.metrics()) {
                Ok(regions) => {
                    found.extend(regions.into_iter().map(|r| Response::Ok(Reply::Region(r))))
                }
                Err(e) => found.push(Response::Err(e)),
            }
            for k in &req.prev_keys {
                let op = sorted(RouteOp::PrevRegion(k.clone()));
                found.push(execute(op, &self.shared, self.metrics()).await);
            }
        } else {
            let mut lookups: Vec<_> = req
                .keys
                .iter()
                .map(|k| RouteOp::Region(k.clone()))
                .chain(req.prev_keys.iter().map(|k| RouteOp::PrevRegion(k.clone())))
                .map(|op| Ok(sorted(op)))
                .collect();
            execute_batch(
                &mut lookups,
                &mut found,
                &mut BatchRoom::default(),
                &self.shared,
                None,
                self.metrics(),
            )
            .await;
        }
        let mut out = pdpb::QueryRegionResponse {
            header: self.header(),
            key_id_map: Vec::with_capacity(req.keys.len()),
            prev_key_id_map: Vec::with_capacity(req.prev_keys.len()),
            ..Default::default()
        };
        for (n, response) in found.into_iter().enumerate() {
            let region = match self.region_of(response)? {
                Ok(region) => region,
                Err(header) => return Ok(self.query_refused(header)),
            };
            let id = add_found(&mut out.regions_by_id, region.as_ref());
            if n < req.keys.len() {
                out.key_id_map.push(id);
            } else {
                out.prev_key_id_map.push(id);
            }
        }
        for &id in &req.ids {
            // PD skips id 0 and ids already found through a key.
            if id == 0
                || out
                    .regions_by_id
                    .get(&id)
                    .is_some_and(|r| r.region.is_some())
            {
                continue;
            }
            let response = execute(sorted(RouteOp::ById(id)), &self.shared, self.metrics()).await;
            match self.region_of(response)? {
                Ok(Some(region)) => {
                    add_found(&mut out.regions_by_id, Some(&region));
                }
                // PD puts a nil value under the id, which gogoproto sends as a map entry with
                // no value; prost cannot leave a message value out, so it is an empty
                // `RegionResponse`. Go decodes either as a response without a region, which
                // pd's router client turns into "not found".
                Ok(None) => {
                    out.regions_by_id.entry(id).or_default();
                }
                Err(header) => return Ok(self.query_refused(header)),
            }
        }
        if req.need_buckets && !by_follower {
            for (id, entry) in out.regions_by_id.iter_mut() {
                if entry.region.is_some() {
                    entry.buckets = self.buckets_of(*id).await?;
                }
            }
        }
        Ok(out)
    }

    /// A `QueryRegion` answer that is only its header.
    pub(super) fn query_refused(
        &self,
        header: Option<pdpb::ResponseHeader>,
    ) -> pdpb::QueryRegionResponse {
        pdpb::QueryRegionResponse {
            header,
            ..Default::default()
        }
    }

    /// A region lookup's `Response`: the region (or none), or a header-only refusal.
    pub(super) fn region_of(
        &self,
        response: Response,
    ) -> Result<Result<Option<Region>, Option<pdpb::ResponseHeader>>, Status> {
        match self.answer(response)? {
            Ok(Reply::Region(found)) => Ok(Ok(found)),
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(Err(header)),
        }
    }
}
