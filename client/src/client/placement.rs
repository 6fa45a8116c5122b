//! Placement calls on the client: typed wrappers over one request each, on pooled streams,
//! and `get_region` answered from the region cache when it can be.

use super::error::ClientError;
use super::Client;
use crate::placement::{Operator, Region, RegionStats, Store, StoreStats, StoreStatus};
use crate::proto::{ErrorReply, Reply, Request, SplitIds, StoreBeat};

fn unexpected(what: &str, reply: Reply) -> ClientError {
    ClientError::Protocol(format!("unexpected reply to {what}: {reply:?}"))
}

impl Client {
    /// One request on a pooled stream, following the leader and retrying within the budget.
    pub async fn call(&self, req: Request) -> Result<Reply, ClientError> {
        let _in_flight = self
            .calls
            .acquire()
            .await
            .map_err(|_| ClientError::Closed)?;
        let pooled = self.streams.lock().await.pop();
        let mut stream = match pooled {
            Some(s) => s,
            None => self.open_stream().await?,
        };
        let result = stream.call_with_retry(&req).await;
        match &result {
            Err(ClientError::Server(ErrorReply::NotLeader { .. }))
            | Err(ClientError::Unavailable(_)) => self.regions.clear(),
            _ => {}
        }
        self.streams.lock().await.push(stream);
        result
    }

    /// A routing read: with follower reads on, answered by the next member in turn when it
    /// can, else (and always without them) by the leader.
    async fn route(&self, req: Request) -> Result<Reply, ClientError> {
        if let Some(followers) = &self.followers {
            if let Some(reply) = followers.read(&req).await {
                return Ok(reply);
            }
        }
        self.call(req).await
    }

    pub async fn bootstrap(&self, store: Store, region: Region) -> Result<(), ClientError> {
        match self
            .call(Request::Bootstrap {
                store: Box::new(store),
                region,
            })
            .await?
        {
            Reply::Done => Ok(()),
            other => Err(unexpected("Bootstrap", other)),
        }
    }

    pub async fn is_bootstrapped(&self) -> Result<bool, ClientError> {
        match self.call(Request::IsBootstrapped).await? {
            Reply::Bootstrapped(b) => Ok(b),
            other => Err(unexpected("IsBootstrapped", other)),
        }
    }

    pub async fn alloc_id(&self) -> Result<u64, ClientError> {
        match self.call(Request::AllocId).await? {
            Reply::Id(id) => Ok(id),
            other => Err(unexpected("AllocId", other)),
        }
    }

    pub async fn put_store(&self, store: Store) -> Result<(), ClientError> {
        match self
            .call(Request::PutStore {
                store: Box::new(store),
            })
            .await?
        {
            Reply::Done => Ok(()),
            other => Err(unexpected("PutStore", other)),
        }
    }

    pub async fn get_store(&self, id: u64) -> Result<Option<StoreStatus>, ClientError> {
        match self.call(Request::GetStore { id }).await? {
            Reply::Store(s) => Ok(s.map(|s| *s)),
            other => Err(unexpected("GetStore", other)),
        }
    }

    /// Every store, asked a page at a time (one request for any real cluster).
    pub async fn get_all_stores(&self) -> Result<Vec<StoreStatus>, ClientError> {
        let mut all: Vec<StoreStatus> = Vec::new();
        loop {
            let after_id = all.last().map_or(0, |s| s.store.id);
            match self.call(Request::GetAllStores { after_id }).await? {
                Reply::Stores { stores, more } => {
                    let progressed = stores.last().is_some_and(|s| s.store.id > after_id);
                    all.extend(stores);
                    if !more {
                        return Ok(all);
                    }
                    if !progressed {
                        return Err(ClientError::Protocol(
                            "GetAllStores: a page with more to come did not advance".into(),
                        ));
                    }
                }
                other => return Err(unexpected("GetAllStores", other)),
            }
        }
    }

    /// A store's report; the cluster version and the store's state come back.
    pub async fn store_heartbeat(
        &self,
        store_id: u64,
        stats: StoreStats,
    ) -> Result<StoreBeat, ClientError> {
        match self
            .call(Request::StoreHeartbeat { store_id, stats })
            .await?
        {
            Reply::StoreHeartbeat(beat) => Ok(beat),
            other => Err(unexpected("StoreHeartbeat", other)),
        }
    }

    /// A leader's report; the operator to run, if any. A stale report drops the region
    /// from the cache.
    pub async fn region_heartbeat(
        &self,
        region: Region,
        stats: RegionStats,
    ) -> Result<Option<Operator>, ClientError> {
        let id = region.id;
        match self.call(Request::RegionHeartbeat { region, stats }).await {
            Ok(Reply::RegionHeartbeat { operator }) => Ok(operator),
            Ok(other) => Err(unexpected("RegionHeartbeat", other)),
            Err(e) => {
                self.on_region_error(id, &e);
                Err(e)
            }
        }
    }

    /// The region holding `key`: from the cache, or asked and cached.
    pub async fn get_region(&self, key: &[u8]) -> Result<Option<Region>, ClientError> {
        if let Some(r) = self.regions.locate(key) {
            return Ok(Some(r));
        }
        let found = self.get_region_uncached(key).await?;
        if let Some(r) = &found {
            self.regions.insert(r.clone());
        }
        Ok(found)
    }

    /// The region holding `key`, asked of the leader (or, with follower reads, of a member).
    pub async fn get_region_uncached(&self, key: &[u8]) -> Result<Option<Region>, ClientError> {
        match self.route(Request::GetRegion { key: key.to_vec() }).await? {
            Reply::Region(r) => Ok(r),
            other => Err(unexpected("GetRegion", other)),
        }
    }

    pub async fn get_prev_region(&self, key: &[u8]) -> Result<Option<Region>, ClientError> {
        match self
            .route(Request::GetPrevRegion { key: key.to_vec() })
            .await?
        {
            Reply::Region(r) => Ok(r),
            other => Err(unexpected("GetPrevRegion", other)),
        }
    }

    pub async fn get_region_by_id(&self, id: u64) -> Result<Option<Region>, ClientError> {
        match self.route(Request::GetRegionById { id }).await? {
            Reply::Region(r) => Ok(r),
            other => Err(unexpected("GetRegionById", other)),
        }
    }

    pub async fn scan_regions(
        &self,
        start: &[u8],
        end: &[u8],
        limit: u32,
    ) -> Result<Vec<Region>, ClientError> {
        let req = Request::ScanRegions {
            start: start.to_vec(),
            end: end.to_vec(),
            limit,
        };
        match self.route(req).await? {
            Reply::Regions(r) => Ok(r),
            other => Err(unexpected("ScanRegions", other)),
        }
    }

    pub async fn ask_batch_split(
        &self,
        region: Region,
        count: u32,
    ) -> Result<Vec<SplitIds>, ClientError> {
        let id = region.id;
        match self.call(Request::AskBatchSplit { region, count }).await {
            Ok(Reply::Splits(s)) => Ok(s),
            Ok(other) => Err(unexpected("AskBatchSplit", other)),
            Err(e) => {
                self.on_region_error(id, &e);
                Err(e)
            }
        }
    }

    pub async fn report_batch_split(&self, regions: Vec<Region>) -> Result<(), ClientError> {
        for r in &regions {
            self.regions.invalidate(r.id);
        }
        match self.call(Request::ReportBatchSplit { regions }).await? {
            Reply::Done => Ok(()),
            other => Err(unexpected("ReportBatchSplit", other)),
        }
    }

    /// Drops what the cache holds of region `id` after an error about it; callers do the
    /// same with errors from the stores (a stale epoch, a moved leader).
    pub fn on_region_error(&self, id: u64, e: &ClientError) {
        match e {
            ClientError::Server(ErrorReply::StaleEpoch(_)) => self.regions.invalidate(id),
            ClientError::Server(ErrorReply::NotLeader { .. }) => self.regions.clear(),
            _ => {}
        }
    }

    pub fn invalidate_region(&self, id: u64) {
        self.regions.invalidate(id);
    }
}
