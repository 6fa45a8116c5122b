//! StoreGlobalConfig, LoadGlobalConfig and the WatchGlobalConfig stream. These messages carry
//! no request header (PD checks no cluster id for them), and errors are gRPC statuses, as PD
//! returns etcd's.

use super::*;
use crate::proto::{ConfigChange, ConfigEvent, ConfigEventKind};

/// How long one watch request waits for a change before the stream checks on its client.
const WATCH_POLL_MS: u32 = 500;

fn kind_from(kind: i32) -> Result<ConfigEventKind, Status> {
    match pdpb::EventType::try_from(kind) {
        Ok(pdpb::EventType::Put) => Ok(ConfigEventKind::Put),
        Ok(pdpb::EventType::Delete) => Ok(ConfigEventKind::Delete),
        Err(_) => Err(Status::invalid_argument(format!(
            "unknown event type {kind}"
        ))),
    }
}

fn event_to(e: ConfigEvent) -> pdpb::GlobalConfigItem {
    pdpb::GlobalConfigItem {
        name: e.key,
        kind: match e.kind {
            ConfigEventKind::Put => pdpb::EventType::Put,
            ConfigEventKind::Delete => pdpb::EventType::Delete,
        } as i32,
        payload: e.value,
        ..Default::default()
    }
}

impl PdService {
    /// A reply of this group's calls, or the status PD would answer: these messages have no
    /// header, so a refusal PD would put in one is a plain error (gRPC UNKNOWN) here.
    async fn global_config(&self, req: Request) -> Result<Reply, Status> {
        match self.call(req).await {
            Response::Ok(reply) => Ok(reply),
            Response::Err(e) => Err(self.status_of(e)),
        }
    }

    fn status_of(&self, e: ErrorReply) -> Status {
        match self.refusal(e.clone()) {
            Err(status) => status,
            Ok(_) => Status::unknown(e.to_string()),
        }
    }

    /// One transaction. A put's value is `value`, or `payload` when `value` is empty, as PD
    /// takes it (TiDB writes `value`, TiCDC `payload`).
    pub(super) async fn store_global_config(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::StoreGlobalConfigRequest>,
    ) -> Result<GrpcResponse<pdpb::StoreGlobalConfigResponse>, Status> {
        self.authorize(&request, Call::StoreGlobalConfig)?;
        let req = request.into_inner();
        let changes = req
            .changes
            .into_iter()
            .map(|item| {
                Ok(ConfigChange {
                    kind: kind_from(item.kind)?,
                    value: if item.value.is_empty() {
                        item.payload
                    } else {
                        item.value.into_bytes()
                    },
                    name: item.name,
                })
            })
            .collect::<Result<Vec<_>, Status>>()?;
        let store = Request::StoreGlobalConfig {
            config_path: req.config_path,
            changes,
        };
        match self.global_config(store).await? {
            Reply::Done => Ok(GrpcResponse::new(pdpb::StoreGlobalConfigResponse::default())),
            other => Err(unexpected(other)),
        }
    }

    /// By names: each one's item (named as asked), or PD's not-found error in the item, and
    /// revision 0. Without names: every item under the path (by full key) and the revision.
    pub(super) async fn load_global_config(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::LoadGlobalConfigRequest>,
    ) -> Result<GrpcResponse<pdpb::LoadGlobalConfigResponse>, Status> {
        self.authorize(&request, Call::LoadGlobalConfig)?;
        let req = request.into_inner();
        let load = Request::LoadGlobalConfig {
            config_path: req.config_path,
            names: req.names,
        };
        match self.global_config(load).await? {
            Reply::GlobalConfig { items, revision } => {
                Ok(GrpcResponse::new(pdpb::LoadGlobalConfigResponse {
                    items: items
                        .into_iter()
                        .map(|item| match item.value {
                            Some(payload) => pdpb::GlobalConfigItem {
                                name: item.name,
                                payload,
                                kind: pdpb::EventType::Put as i32,
                                ..Default::default()
                            },
                            None => pdpb::GlobalConfigItem {
                                error: Some(pdpb::Error {
                                    r#type: pdpb::ErrorType::GlobalConfigNotFound as i32,
                                    message: format!("key {} not found", item.name),
                                }),
                                name: item.name,
                                ..Default::default()
                            },
                        })
                        .collect(),
                    revision,
                }))
            }
            other => Err(unexpected(other)),
        }
    }

    /// The changes under the path from `revision` on (0: from now), one message per batch
    /// found, each with the revision of its last change. Changes no longer held: PD's
    /// DATA_COMPACTED header, then the stream ends with the error (the client loads again).
    /// The stream also ends when this node stops leading; it is bounded like the others: a
    /// client that does not read holds up its own watch only, until the changes it has not
    /// read are no longer held.
    pub(super) async fn watch_global_config(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::WatchGlobalConfigRequest>,
    ) -> Result<GrpcResponse<Stream<pdpb::WatchGlobalConfigResponse>>, Status> {
        self.authorize(&request, Call::WatchGlobalConfig)?;
        let req = request.into_inner();
        let (tx, rx) = mpsc::channel(STREAM_BACKLOG);
        tokio::spawn(self.clone().watch_stream(req.config_path, req.revision, tx));
        Ok(GrpcResponse::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn watch_stream(
        self: Arc<Self>,
        config_path: String,
        mut revision: i64,
        tx: mpsc::Sender<Result<pdpb::WatchGlobalConfigResponse, Status>>,
    ) {
        let mut shutdown = self.shared.shutdown.clone();
        loop {
            let ask = Request::WatchGlobalConfig {
                config_path: config_path.clone(),
                revision,
                wait_ms: WATCH_POLL_MS,
            };
            let response = tokio::select! {
                r = self.call(ask) => r,
                _ = shutdown.wait_for(|s| *s) => return,
                _ = tx.closed() => return,
            };
            let message = match response {
                Response::Ok(Reply::GlobalConfigChanges { changes, next }) => {
                    revision = next;
                    let Some(last) = changes.last().map(|c| c.revision) else {
                        continue;
                    };
                    Ok(pdpb::WatchGlobalConfigResponse {
                        changes: changes.into_iter().map(event_to).collect(),
                        revision: last,
                        header: None,
                    })
                }
                Response::Ok(other) => Err(unexpected(other)),
                Response::Err(ErrorReply::Refused(compacted @ Refusal::Compacted { .. })) => {
                    let header =
                        self.error_header(pdpb::ErrorType::DataCompacted, compacted.to_string());
                    let _ = tx
                        .send(Ok(pdpb::WatchGlobalConfigResponse {
                            header,
                            ..Default::default()
                        }))
                        .await;
                    Err(Status::unknown(
                        "mvcc: required revision has been compacted",
                    ))
                }
                Response::Err(e) => Err(self.status_of(e)),
            };
            let end = message.is_err();
            if tx.send(message).await.is_err() || end {
                return;
            }
        }
    }
}
