//! Failovers as the members see them, for `--plot`. Beside the load, one small client per
//! member (those given, and those the members list) asks that member who leads, ten times a
//! second; a new leader is noted when most of the members that answered lately name it, at the
//! time they first did. A dead leader's own answer is simply missing, so the change shows as
//! soon as the survivors see it in etcd, not when a client's connection to the dead node gives
//! up. These clients have their own connections and never touch the load's: they cost it a few
//! tens of small requests a second. Against a single node nothing changes and nothing is noted.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use meridian::client::{Client, ClientOptions};
use meridian::tls::Trust;
use tokio::sync::{mpsc, watch};

/// How often each member is asked.
const EVERY: Duration = Duration::from_millis(100);
/// An answer older than this no longer counts towards the majority.
const FRESH: Duration = Duration::from_secs(1);

pub struct LeaderWatch {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Vec<(f64, String)>>,
}

impl LeaderWatch {
    /// Starts watching; times are seconds since `start`.
    pub fn start(endpoints: Vec<String>, trust: Trust, start: Instant) -> LeaderWatch {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(watch(endpoints, trust, start, stopped));
        LeaderWatch { stop, task }
    }

    /// Stops watching: each change of leader seen, as (seconds since the start, "leader NAME").
    pub async fn finish(self) -> Vec<(f64, String)> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// One member's answer: who it says leads (None: nobody, as far as it knows), and every
/// member it lists.
struct Answer {
    member: String,
    at: Instant,
    leader: Option<String>,
    members: Vec<String>,
}

async fn watch(
    endpoints: Vec<String>,
    trust: Trust,
    start: Instant,
    stopped: watch::Receiver<bool>,
) -> Vec<(f64, String)> {
    let (tx, mut answers) = mpsc::channel::<Answer>(64);
    let mut asked: Vec<String> = Vec::new();
    let ask = |member: &str, asked: &mut Vec<String>| {
        if !asked.iter().any(|m| m == member) {
            asked.push(member.to_string());
            tokio::spawn(ask_member(
                member.to_string(),
                trust.clone(),
                tx.clone(),
                stopped.clone(),
            ));
        }
    };
    for e in &endpoints {
        ask(e, &mut asked);
    }
    let mut stop = stopped.clone();
    let mut views: HashMap<String, (Instant, Option<String>)> = HashMap::new();
    let (mut leader, mut changes) = (None::<String>, Vec::new());
    loop {
        let answer = tokio::select! {
            _ = stop.changed() => return changes,
            a = answers.recv() => match a {
                Some(a) => a,
                None => return changes,
            },
        };
        for m in &answer.members {
            ask(m, &mut asked);
        }
        views.insert(answer.member, (answer.at, answer.leader));
        let mut votes: HashMap<&str, usize> = HashMap::new();
        let mut fresh = 0;
        for (at, l) in views.values() {
            if at.elapsed() < FRESH {
                fresh += 1;
                if let Some(l) = l {
                    *votes.entry(l).or_default() += 1;
                }
            }
        }
        let Some((named, _)) = votes.into_iter().find(|(_, n)| 2 * n > fresh) else {
            continue;
        };
        if leader.as_deref() != Some(named) {
            if leader.is_some() {
                let at = answer.at.saturating_duration_since(start).as_secs_f64();
                changes.push((at, format!("leader {named}")));
            }
            leader = Some(named.to_string());
        }
    }
}

/// Asks `member` who leads every `EVERY` until stopped, (re)connecting as needed.
async fn ask_member(
    member: String,
    trust: Trust,
    answers: mpsc::Sender<Answer>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut opts = ClientOptions::new(vec![member.clone()], trust);
    opts.retry_budget = Duration::from_millis(300);
    let mut client = None;
    loop {
        if client.is_none() {
            client = tokio::time::timeout(Duration::from_secs(1), Client::connect(opts.clone()))
                .await
                .ok()
                .and_then(Result::ok);
        }
        if let Some(c) = &client {
            match tokio::time::timeout(Duration::from_millis(500), c.members()).await {
                Ok(Ok(m)) => {
                    let answer = Answer {
                        member: member.clone(),
                        at: Instant::now(),
                        leader: m.leader.map(|l| l.name),
                        members: m.members.into_iter().map(|m| m.client_url).collect(),
                    };
                    if answers.send(answer).await.is_err() {
                        return;
                    }
                }
                _ => client = None,
            }
        }
        tokio::select! {
            _ = stopped.changed() => return,
            _ = tokio::time::sleep(EVERY) => {}
        }
    }
}
