//! Runs one scripted conversation through the real `etcd-client` against a real etcd and
//! against the model, each recording a transcript of what matters (values, found or not,
//! txn outcomes, revisions relative to the start, lease ids by order of appearance, TTLs,
//! watch events, error codes and messages), and compares the two.

use std::future::Future;
use std::time::Duration;

use etcd_client::{Client, Error, KeyValue, TxnOpResponse, TxnResponse, WatchStream};
use etcd_model::EtcdModel;
use meridian::harness::EtcdProcess;

/// What a script saw, one line per observation, in the terms both sides share.
pub struct Transcript {
    pub lines: Vec<String>,
    base: i64,
    leases: Vec<i64>,
}

impl Transcript {
    /// Starts a transcript on `client`, with revisions counted from the store's revision now.
    pub async fn start(client: &mut Client) -> Transcript {
        let base = client
            .get("\0", None)
            .await
            .expect("the first read")
            .header()
            .map(|h| h.revision())
            .unwrap_or_default();
        Transcript {
            lines: Vec::new(),
            base,
            leases: Vec::new(),
        }
    }

    pub fn line(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }

    /// The revision the store had when the script started.
    pub fn base(&self) -> i64 {
        self.base
    }

    /// A revision relative to the start; 0 stays 0 (no revision).
    pub fn rev(&self, revision: i64) -> String {
        if revision == 0 {
            "0".into()
        } else {
            format!("+{}", revision - self.base)
        }
    }

    /// A lease by its order of appearance (ids differ between etcd and the model).
    pub fn lease(&mut self, id: i64) -> String {
        if id == 0 {
            return "-".into();
        }
        let n = match self.leases.iter().position(|l| *l == id) {
            Some(n) => n,
            None => {
                self.leases.push(id);
                self.leases.len() - 1
            }
        };
        format!("L{n}")
    }

    pub fn kv(&mut self, kv: &KeyValue) -> String {
        format!(
            "{}={} c{} m{} v{} {}",
            String::from_utf8_lossy(kv.key()),
            String::from_utf8_lossy(kv.value()),
            self.rev(kv.create_revision()),
            self.rev(kv.mod_revision()),
            kv.version(),
            self.lease(kv.lease())
        )
    }

    pub fn kvs(&mut self, kvs: &[KeyValue]) -> String {
        let all: Vec<String> = kvs.iter().map(|kv| self.kv(kv)).collect();
        format!("[{}]", all.join(", "))
    }

    pub fn txn(&mut self, response: &TxnResponse) -> String {
        let revision = self.rev(response.header().map(|h| h.revision()).unwrap_or_default());
        let ops: Vec<String> = response
            .op_responses()
            .iter()
            .map(|op| match op {
                TxnOpResponse::Put(p) => {
                    let prev = p.prev_key().map(|kv| self.kv(kv)).unwrap_or_default();
                    format!("put(prev {prev})")
                }
                TxnOpResponse::Get(g) => format!(
                    "get({} count {} more {})",
                    self.kvs(g.kvs()),
                    g.count(),
                    g.more()
                ),
                TxnOpResponse::Delete(d) => {
                    format!("delete({} {})", d.deleted(), self.kvs(d.prev_kvs()))
                }
                TxnOpResponse::Txn(t) => format!("txn({})", self.txn_nested(t)),
            })
            .collect();
        format!(
            "succeeded {} rev {} [{}]",
            response.succeeded(),
            revision,
            ops.join("; ")
        )
    }

    fn txn_nested(&mut self, response: &TxnResponse) -> String {
        let ops: Vec<String> = response
            .op_responses()
            .iter()
            .map(|op| match op {
                TxnOpResponse::Put(_) => "put".to_string(),
                TxnOpResponse::Get(g) => self.kvs(g.kvs()),
                TxnOpResponse::Delete(d) => format!("delete {}", d.deleted()),
                TxnOpResponse::Txn(t) => self.txn_nested(t),
            })
            .collect();
        format!("succeeded {} [{}]", response.succeeded(), ops.join("; "))
    }

    /// An outcome: `ok` rendered by `render`, or the error as etcd's code and message.
    pub fn outcome<T>(
        &mut self,
        what: &str,
        result: Result<T, Error>,
        render: impl FnOnce(&mut Transcript, T) -> String,
    ) {
        let line = match result {
            Ok(value) => render(self, value),
            Err(e) => error(&e),
        };
        self.line(format!("{what}: {line}"));
    }

    /// Reads watch responses until `events` events have come (or 10 s pass), and records the
    /// events one per line, with created/canceled responses marked.
    pub async fn watch_events(&mut self, what: &str, stream: &mut WatchStream, events: usize) {
        let mut seen = 0;
        while seen < events {
            let message =
                match tokio::time::timeout(Duration::from_secs(10), stream.message()).await {
                    Err(_) => {
                        self.line(format!("{what}: timed out after {seen} events"));
                        return;
                    }
                    Ok(Err(e)) => {
                        self.line(format!("{what}: {}", error(&e)));
                        return;
                    }
                    Ok(Ok(None)) => {
                        self.line(format!("{what}: stream ended"));
                        return;
                    }
                    Ok(Ok(Some(message))) => message,
                };
            self.watch_marks(what, &message);
            for event in message.events() {
                seen += 1;
                let kv = event.kv().map(|kv| self.kv(kv)).unwrap_or_default();
                let prev = event
                    .prev_kv()
                    .map(|kv| format!(" prev {}", self.kv(kv)))
                    .unwrap_or_default();
                self.line(format!("{what}: {:?} {kv}{prev}", event.event_type()));
            }
        }
    }

    /// Reads one watch response that carries no events (created, canceled) and records it.
    pub async fn watch_control(&mut self, what: &str, stream: &mut WatchStream) -> i64 {
        match tokio::time::timeout(Duration::from_secs(10), stream.message()).await {
            Ok(Ok(Some(message))) => {
                self.watch_marks(what, &message);
                if !message.events().is_empty() {
                    self.line(format!(
                        "{what}: {} unexpected events",
                        message.events().len()
                    ));
                }
                message.watch_id()
            }
            Ok(Ok(None)) => {
                self.line(format!("{what}: stream ended"));
                -1
            }
            Ok(Err(e)) => {
                self.line(format!("{what}: {}", error(&e)));
                -1
            }
            Err(_) => {
                self.line(format!("{what}: timed out"));
                -1
            }
        }
    }

    fn watch_marks(&mut self, what: &str, message: &etcd_client::WatchResponse) {
        if message.created() || message.canceled() || message.compact_revision() != 0 {
            let compact = if message.compact_revision() != 0 {
                self.rev(message.compact_revision())
            } else {
                "-".into()
            };
            self.line(format!(
                "{what}: watch {} created {} canceled {} compact {} reason {:?}",
                message.watch_id(),
                message.created(),
                message.canceled(),
                compact,
                message.cancel_reason()
            ));
        }
    }
}

/// An error as the client sees it: a gRPC status's code and message, or the client's own.
pub fn error(e: &Error) -> String {
    match e {
        Error::GRpcStatus(status) => format!("error {:?} {:?}", status.code(), status.message()),
        other => format!("client error {other}"),
    }
}

async fn against_etcd<F, Fut>(script: F) -> Vec<String>
where
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = Vec<String>>,
{
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().to_path_buf();
    // Starting etcd waits for it with blocking sleeps.
    let etcd = tokio::task::spawn_blocking(move || EtcdProcess::start(&path))
        .await
        .expect("the etcd starter")
        .expect("etcd starts");
    let client = Client::connect([etcd.endpoint()], None)
        .await
        .expect("connect to etcd");
    let lines = script(client).await;
    drop(etcd);
    lines
}

async fn against_model<F, Fut>(script: F) -> Vec<String>
where
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = Vec<String>>,
{
    let model = EtcdModel::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("its address");
    let server = tokio::spawn(model.clone().serve(listener));
    let client = Client::connect([format!("http://{address}")], None)
        .await
        .expect("connect to the model");
    let lines = script(client).await;
    server.abort();
    lines
}

/// Runs `script` against a real etcd and against the model (at once) and fails, showing
/// both transcripts, unless they agree line for line.
pub async fn conform<F, Fut>(script: F)
where
    F: Fn(Client) -> Fut,
    Fut: Future<Output = Vec<String>>,
{
    let (real, model) = tokio::join!(against_etcd(&script), against_model(&script));
    if std::env::var_os("CONFORMANCE_SHOW").is_some() {
        eprintln!(
            "--- etcd ---\n{}\n--- model ---\n{}",
            real.join("\n"),
            model.join("\n")
        );
    }
    if real != model {
        let first = real
            .iter()
            .zip(&model)
            .position(|(a, b)| a != b)
            .unwrap_or(real.len().min(model.len()));
        panic!(
            "the model differs from etcd at line {first}:\n  etcd:  {:?}\n  model: {:?}\n\
             --- etcd ---\n{}\n--- model ---\n{}",
            real.get(first),
            model.get(first),
            real.join("\n"),
            model.join("\n")
        );
    }
    // A script that recorded nothing compares nothing.
    assert!(real.len() > 3, "the transcript is too short: {real:?}");
}
