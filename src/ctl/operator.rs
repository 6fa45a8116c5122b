//! `meridian ctl operator`, pd-ctl's `operator` commands: `show [KIND]`, `check REGION`,
//! `add transfer-leader|transfer-region|transfer-peer|add-peer|add-learner|remove-peer|
//! merge-region|split-region|scatter-region ...`, `remove REGION` and `history [START]`, each
//! one call to PD's HTTP API (`/operators`, `/operators/{region}`, `/operators/records`) sent as
//! `scheduling` sends its verbs. Ids are read as pd-ctl reads them (refused in Go's words);
//! what the operator may be is the server's to say, so the body carries the request as given.
//! Owns no state.

use clap::Subcommand;
use serde_json::{json, Value};

use super::scheduling::{call, said};
use super::Shown;
use crate::tls::Trust;

/// `ctl operator ...`.
#[derive(Subcommand)]
pub enum OperatorAction {
    /// The operators running; with a kind (`admin`, `leader`, `region`, `waiting`), those of
    /// that kind.
    Show { kind: Option<String> },
    /// A region's operator: the one running, or how the last one ended (with no region, as
    /// pd-ctl: the operators running).
    Check { region: Option<String> },
    /// Add an operator.
    Add {
        #[command(subcommand)]
        op: AddOperator,
    },
    /// Cancel the region's running operator.
    Remove { region: String },
    /// The operators that ended since START (a Unix time in seconds; all kept when absent).
    History { start: Option<String> },
}

/// `ctl operator add ...`, pd-ctl's operator names and arguments.
#[derive(Subcommand)]
pub enum AddOperator {
    /// Move a region's leader to the store: REGION TO_STORE.
    TransferLeader { region: String, to_store: String },
    /// Move a region's peers to the stores, roles optional: REGION STORE [ROLE] STORE [ROLE]...
    TransferRegion {
        region: String,
        #[arg(required = true)]
        stores_and_roles: Vec<String>,
    },
    /// Move a region's peer from one store to another: REGION FROM_STORE TO_STORE.
    TransferPeer {
        region: String,
        from_store: String,
        to_store: String,
    },
    /// Add a peer on the store: REGION STORE.
    AddPeer { region: String, store: String },
    /// Add a learner on the store: REGION STORE.
    AddLearner { region: String, store: String },
    /// Remove the region's peer on the store: REGION STORE.
    RemovePeer { region: String, store: String },
    /// Merge the source region into the target: SOURCE TARGET.
    MergeRegion { source: String, target: String },
    /// Split a region.
    SplitRegion {
        region: String,
        /// How the split key is found: `scan`, `approximate` or `usekey`.
        #[arg(long, default_value = "scan")]
        policy: String,
        /// The split key for `usekey`, hex.
        #[arg(long)]
        keys: Option<String>,
    },
    /// Scatter a region's peers and leader over the stores.
    ScatterRegion { region: String },
}

/// pd-ctl's `strconv.ParseUint`, refused in Go's words.
fn id(text: &str) -> anyhow::Result<u64> {
    text.parse().map_err(|_| {
        let why = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            "value out of range"
        } else {
            "invalid syntax"
        };
        anyhow::anyhow!("strconv.ParseUint: parsing {text:?}: {why}")
    })
}

/// pd-ctl's peer roles in `transfer-region`.
const ROLES: [&str; 4] = ["leader", "voter", "follower", "learner"];

/// pd-ctl's `transfer-region` arguments: stores alone, or each store followed by its role.
fn stores_and_roles(args: &[String]) -> anyhow::Result<(Vec<u64>, Vec<String>)> {
    if args.len() < 2 || !ROLES.contains(&args[1].as_str()) {
        return Ok((
            args.iter().map(|a| id(a)).collect::<Result<_, _>>()?,
            vec![],
        ));
    }
    let (mut stores, mut roles) = (Vec::new(), Vec::new());
    for (i, arg) in args.iter().enumerate() {
        if i % 2 == 0 {
            stores.push(id(arg)?);
        } else if ROLES.contains(&arg.as_str()) {
            roles.push(arg.clone());
        }
    }
    if roles.len() != stores.len() {
        anyhow::bail!("peer role is not match with store");
    }
    Ok((stores, roles))
}

/// The body of `POST /operators` for `op`, as pd-ctl builds it.
fn body(op: AddOperator) -> anyhow::Result<Value> {
    Ok(match op {
        AddOperator::TransferLeader { region, to_store } => json!({
            "name": "transfer-leader", "region_id": id(&region)?, "to_store_id": id(&to_store)?,
        }),
        AddOperator::TransferRegion {
            region,
            stores_and_roles: args,
        } => {
            let region = id(&region)?;
            let (stores, roles) = stores_and_roles(&args)?;
            let mut body =
                json!({"name": "transfer-region", "region_id": region, "to_store_ids": stores});
            if !roles.is_empty() {
                body["peer_roles"] = json!(roles);
            }
            body
        }
        AddOperator::TransferPeer {
            region,
            from_store,
            to_store,
        } => json!({
            "name": "transfer-peer", "region_id": id(&region)?,
            "from_store_id": id(&from_store)?, "to_store_id": id(&to_store)?,
        }),
        AddOperator::AddPeer { region, store } => {
            json!({"name": "add-peer", "region_id": id(&region)?, "store_id": id(&store)?})
        }
        AddOperator::AddLearner { region, store } => {
            json!({"name": "add-learner", "region_id": id(&region)?, "store_id": id(&store)?})
        }
        AddOperator::RemovePeer { region, store } => {
            json!({"name": "remove-peer", "region_id": id(&region)?, "store_id": id(&store)?})
        }
        AddOperator::MergeRegion { source, target } => json!({
            "name": "merge-region", "source_region_id": id(&source)?,
            "target_region_id": id(&target)?,
        }),
        AddOperator::SplitRegion {
            region,
            policy,
            keys,
        } => {
            let region = id(&region)?;
            if !["scan", "approximate", "usekey"].contains(&policy.as_str()) {
                anyhow::bail!("Error: unknown policy");
            }
            let mut body = json!({"name": "split-region", "region_id": region, "policy": policy});
            if let Some(keys) = keys.filter(|k| !k.is_empty()) {
                body["keys"] = json!([keys]);
            }
            body
        }
        AddOperator::ScatterRegion { region } => {
            json!({"name": "scatter-region", "region_id": id(&region)?})
        }
    })
}

/// A path segment as given, escaped so that any text reaches the server whole (it answers a
/// bad id in PD's words).
fn segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A list of operator strings one a line (PD's `null` for none shows as nothing).
fn lines(answer: Value) -> Shown {
    let text = match &answer {
        Value::Array(a) => a
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    Shown { json: answer, text }
}

pub fn run(endpoints: &[String], trust: &Trust, action: OperatorAction) -> anyhow::Result<Shown> {
    match action {
        OperatorAction::Show { kind } => {
            let path = match kind {
                Some(kind) => format!("/operators?kind={}", segment(&kind)),
                None => "/operators".to_string(),
            };
            call(endpoints, trust, "GET", &path, None).map(lines)
        }
        OperatorAction::Check { region: None } => {
            call(endpoints, trust, "GET", "/operators", None).map(lines)
        }
        OperatorAction::Check {
            region: Some(region),
        } => {
            let path = format!("/operators/{}", segment(&region));
            call(endpoints, trust, "GET", &path, None).map(said)
        }
        OperatorAction::Add { op } => {
            let body = body(op)?;
            call(endpoints, trust, "POST", "/operators", Some(&body)).map(said)
        }
        OperatorAction::Remove { region } => {
            let path = format!("/operators/{}", segment(&region));
            call(endpoints, trust, "DELETE", &path, None).map(said)
        }
        OperatorAction::History { start } => {
            let path = match start {
                Some(start) => format!("/operators/records?from={}", segment(&start)),
                None => "/operators/records".to_string(),
            };
            call(endpoints, trust, "GET", &path, None).map(lines)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ids_are_read_as_pd_ctl_reads_them() {
        assert_eq!(id("42").unwrap(), 42);
        let bad = id("x1").unwrap_err().to_string();
        assert_eq!(bad, "strconv.ParseUint: parsing \"x1\": invalid syntax");
        let big = id("99999999999999999999").unwrap_err().to_string();
        assert!(big.ends_with("value out of range"), "{big}");
    }

    #[test]
    fn bodies_are_pd_ctls() {
        let tl = AddOperator::TransferLeader {
            region: "10".into(),
            to_store: "2".into(),
        };
        assert_eq!(
            body(tl).unwrap(),
            json!({"name": "transfer-leader", "region_id": 10, "to_store_id": 2})
        );
        let split = AddOperator::SplitRegion {
            region: "10".into(),
            policy: "usekey".into(),
            keys: Some("6D".into()),
        };
        assert_eq!(
            body(split).unwrap(),
            json!({"name": "split-region", "region_id": 10, "policy": "usekey", "keys": ["6D"]})
        );
        let unknown = AddOperator::SplitRegion {
            region: "10".into(),
            policy: "guess".into(),
            keys: None,
        };
        assert_eq!(
            body(unknown).unwrap_err().to_string(),
            "Error: unknown policy"
        );
        assert_eq!(
            stores_and_roles(&strings(&["1", "leader", "2", "learner"])).unwrap(),
            (vec![1, 2], strings(&["leader", "learner"]))
        );
        assert_eq!(
            stores_and_roles(&strings(&["1", "2"])).unwrap(),
            (vec![1, 2], vec![])
        );
    }

    #[test]
    fn segments_reach_the_server_whole() {
        assert_eq!(segment("10"), "10");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }
}
