//! TiKV's side of the simulation: the stores (alive or stopped, their counts and snapshot
//! links) and the regions as their leaders hold them, and how a leader carries out a step sent
//! by PD with the timing model's delays: a learner's snapshot and catch-up, promotion, removal,
//! a leader transfer; an election after a leader's loss; a store stopping and starting. Keeps
//! the count of regions that are not healed as each region changes.
//!
//! Must not: call the scheduler or change PD's store map and view (that is the event loop's,
//! in `mod.rs`; the view is read here only to judge a step against the safety rules), or
//! decide when a store stops (that is the scenario's, in `actions`).

use meridian::placement::schedule::{Cluster, Pending, RegionInput};
use meridian::placement::{
    Label, Operator, Peer, PeerRole, Region, Store, StoreDetails, StoreState,
};
use rand::Rng;

use super::Sim;
use crate::queue::Event;

pub(super) struct SimStore {
    pub(super) id: u64,
    pub(super) zone: u32,
    pub(super) alive: bool,
    pub(super) joined: bool,
    pub(super) decommissioned: bool,
    pub(super) peers: u64,
    pub(super) leaders: u64,
    /// When its snapshot link is free again, each way.
    pub(super) send_free_ms: u64,
    pub(super) recv_free_ms: u64,
    /// When its TiKV last started (joined or came back): a leader's first report of a region
    /// since then covers the time from it (TiKV's `start_ts`).
    pub(super) started_ms: u64,
}

pub(super) struct SimRegion {
    pub(super) region: Region,
    /// Learners still catching up (TiKV's `pending_peers`).
    pub(super) pending: Vec<u64>,
    /// PD's operator for the region.
    pub(super) slot: Option<Box<Pending>>,
    pub(super) good: bool,
    /// Its data (MiB): the scenario's region size, until keys are deleted or regions merge.
    pub(super) size_mib: u64,
    /// Merged into another: no longer a region (its index is kept so events stay valid).
    pub(super) gone: bool,
    /// A merge is under way (sent again meanwhile, it is not started twice).
    pub(super) merging: bool,
    /// Bytes written per second (the hot write load; 0 for the rest).
    pub(super) write_bps: u64,
    /// When its leader last reported what it wrote, and that leader's store: TiKV keeps the
    /// time of a region's last report per store.
    pub(super) reported_ms: u64,
    pub(super) reported_by: u64,
}

/// The record a simulated store registers with PD.
pub(super) fn store_record(id: u64, zone: u32) -> Store {
    Store {
        id,
        address: format!("store{id}:20160"),
        labels: vec![
            Label {
                key: "zone".into(),
                value: format!("z{}", zone + 1),
            },
            Label {
                key: "host".into(),
                value: format!("h{id}"),
            },
        ],
        state: StoreState::Up,
        details: std::sync::Arc::new(StoreDetails {
            version: "8.5.0".into(),
            ..StoreDetails::default()
        }),
    }
}

impl Sim {
    pub(super) fn leader_alive(&self, i: usize) -> bool {
        !self.regions[i].gone
            && self.regions[i]
                .region
                .leader_peer()
                .is_some_and(|p| self.stores[(p.store_id - 1) as usize].alive)
    }

    /// Changes region `i`, keeping the count of regions that are not healed.
    pub(super) fn change(&mut self, i: usize, f: impl FnOnce(&mut SimRegion)) {
        f(&mut self.regions[i]);
        let good = self.is_good(&self.regions[i]);
        let r = &mut self.regions[i];
        if r.good != good {
            if good {
                self.bad -= 1;
            } else {
                self.bad += 1;
            }
            r.good = good;
        }
    }

    fn is_good(&self, r: &SimRegion) -> bool {
        if r.gone {
            return true;
        }
        let peers = &r.region.peers;
        if peers.len() != self.cfg.max_replicas
            || !r.pending.is_empty()
            || peers.iter().any(|p| p.role != PeerRole::Voter)
        {
            return false;
        }
        for (k, p) in peers.iter().enumerate() {
            let s = &self.stores[(p.store_id - 1) as usize];
            if !s.alive || s.decommissioned {
                return false;
            }
            if peers[..k]
                .iter()
                .any(|q| self.stores[(q.store_id - 1) as usize].zone == s.zone)
            {
                return false;
            }
        }
        true
    }

    /// Recounts every region (after a store's state changed).
    pub(super) fn recount(&mut self) {
        let mut bad = 0;
        for i in 0..self.regions.len() {
            let good = self.is_good(&self.regions[i]);
            self.regions[i].good = good;
            bad += u64::from(!good);
        }
        self.bad = bad;
    }

    /// The leader heartbeats at once, as TiKV does after a conf change or a leader change.
    pub(super) fn beat_now(&mut self, i: usize) {
        self.q.push(
            self.now,
            Event::RegionBeat {
                region: i as u32,
                periodic: false,
            },
        );
    }

    /// The leader of region `i` carries out `op` (checked against the safety rules first).
    pub(super) fn carry_out(&mut self, i: usize, op: Operator) {
        if !self.leader_alive(i) {
            return;
        }
        {
            let r = &self.regions[i];
            let input = RegionInput {
                region: &r.region,
                pending_peers: &r.pending,
                size_mib: r.size_mib,
                hot: None,
            };
            let c = Cluster {
                cfg: &self.cfg,
                stores: &self.view,
                in_flight: &self.in_flight,
                now_ms: self.now,
            };
            let healthy = |p: &Peer| input.is_healthy(&c, p);
            self.check.step(self.now, &r.region, &op, &healthy);
        }
        let size = self.regions[i].size_mib;
        match op {
            Operator::AddPeer(p) => {
                let existing = self.regions[i]
                    .region
                    .peers
                    .iter()
                    .find(|q| q.id == p.id)
                    .map(|q| q.role);
                match (existing, p.role) {
                    (None, _) => {
                        // A new learner (or voter): it waits for a snapshot.
                        let store = (p.store_id - 1) as usize;
                        let leader = self.regions[i]
                            .region
                            .leader_peer()
                            .map(|l| (l.store_id - 1) as usize)
                            .unwrap_or(store);
                        let peer = p.id;
                        self.change(i, |r| {
                            r.region.peers.push(p);
                            r.region.epoch.conf_ver += 1;
                            r.pending.push(peer);
                        });
                        self.stores[store].peers += 1;
                        let ms = size * 1000 / self.scn.timing.snapshot_mib_per_s.max(1);
                        let start = self
                            .now
                            .max(self.stores[store].recv_free_ms)
                            .max(self.stores[leader].send_free_ms);
                        self.stores[store].recv_free_ms = start + ms;
                        self.stores[leader].send_free_ms = start + ms;
                        self.q.push(
                            start + ms,
                            Event::SnapshotApplied {
                                region: i as u32,
                                peer,
                            },
                        );
                        self.beat_now(i);
                    }
                    (Some(PeerRole::Learner), PeerRole::Voter) => {
                        self.change(i, |r| {
                            if let Some(q) = r.region.peers.iter_mut().find(|q| q.id == p.id) {
                                q.role = PeerRole::Voter;
                            }
                            r.region.epoch.conf_ver += 1;
                        });
                        self.moves += 1;
                        self.beat_now(i);
                    }
                    // Sent again while it is in progress, or done: nothing new.
                    _ => {}
                }
            }
            Operator::RemovePeer(p) => {
                let r = &self.regions[i].region;
                // TiKV refuses to remove its own leader.
                if r.leader == Some(p.id) || !r.peers.iter().any(|q| q.id == p.id) {
                    return;
                }
                self.change(i, |r| {
                    r.region.peers.retain(|q| q.id != p.id);
                    r.region.epoch.conf_ver += 1;
                    r.pending.retain(|q| *q != p.id);
                });
                self.stores[(p.store_id - 1) as usize].peers -= 1;
                self.beat_now(i);
            }
            Operator::TransferLeader(p) => {
                let at = self.now + self.scn.timing.transfer_leader_ms;
                self.q.push(
                    at,
                    Event::LeaderMoved {
                        region: i as u32,
                        peer: p.id,
                    },
                );
            }
            Operator::ChangePeerV2(changes) => self.change_peers_v2(i, &changes),
            // The scheduler never asks for a split; only SplitRegions does, which the
            // simulator does not drive.
            Operator::Split(_) => {}
            Operator::Merge(target) => self.prepare_merge(i, &target),
        }
    }

    /// A joint-consensus change, as TiKV applies `ChangePeerV2`: no change leaves the joint
    /// state (refused while the leader is demoting); one change is made at once; more enter
    /// the joint state, learners becoming incoming voters and voters demoting ones (refused
    /// unless every peer is there in the role the change starts from, or a joint state is on).
    fn change_peers_v2(&mut self, i: usize, changes: &[Peer]) {
        let r = &self.regions[i].region;
        let joint = r.peers.iter().any(|p| p.role.is_joint());
        if changes.is_empty() {
            let leader_demoting = r
                .leader_peer()
                .is_some_and(|l| l.role == PeerRole::DemotingVoter);
            if !joint || leader_demoting {
                return;
            }
            // TiKV counts each peer that leaves a joint role in the epoch, as PD expects.
            let changed = r.peers.iter().filter(|p| p.role.is_joint()).count() as u64;
            self.change(i, |r| {
                for q in &mut r.region.peers {
                    q.role = match q.role {
                        PeerRole::IncomingVoter => PeerRole::Voter,
                        PeerRole::DemotingVoter => PeerRole::Learner,
                        role => role,
                    };
                }
                r.region.epoch.conf_ver += changed;
            });
            self.beat_now(i);
            return;
        }
        let from_ok = changes.iter().all(|c| {
            r.peers.iter().any(|q| {
                q.id == c.id
                    && match c.role {
                        PeerRole::Voter => q.role == PeerRole::Learner,
                        _ => q.role == PeerRole::Voter,
                    }
            })
        });
        if joint || !from_ok {
            // Sent again while in progress, or done: nothing new.
            return;
        }
        let simple = changes.len() == 1;
        let promoted = changes.iter().filter(|c| c.role == PeerRole::Voter).count() as u64;
        self.change(i, |r| {
            for c in changes {
                if let Some(q) = r.region.peers.iter_mut().find(|q| q.id == c.id) {
                    q.role = match (c.role, simple) {
                        (PeerRole::Voter, true) => PeerRole::Voter,
                        (PeerRole::Voter, false) => PeerRole::IncomingVoter,
                        (_, true) => PeerRole::Learner,
                        (_, false) => PeerRole::DemotingVoter,
                    };
                }
            }
            r.region.epoch.conf_ver += changes.len() as u64;
        });
        self.moves += promoted;
        self.beat_now(i);
    }

    pub(super) fn leader_moved(&mut self, i: usize, peer: u64) {
        let r = &self.regions[i].region;
        if r.leader == Some(peer) || !self.leader_alive(i) {
            return;
        }
        let Some(to) = r
            .peers
            .iter()
            .find(|p| p.id == peer && p.role != PeerRole::Learner)
            .map(|p| p.store_id)
        else {
            return;
        };
        if !self.stores[(to - 1) as usize].alive {
            return;
        }
        self.set_leader(i, peer);
        self.leader_transfers += 1;
        self.beat_now(i);
    }

    fn set_leader(&mut self, i: usize, peer: u64) {
        if let Some(old) = self.regions[i].region.leader_peer().map(|p| p.store_id) {
            self.stores[(old - 1) as usize].leaders -= 1;
        }
        let r = &mut self.regions[i].region;
        r.leader = Some(peer);
        if let Some(new) = r.leader_peer().map(|p| p.store_id) {
            self.stores[(new - 1) as usize].leaders += 1;
        }
    }

    /// A region that lost its leader elects a live voter, if it has one.
    pub(super) fn elect(&mut self, i: usize) {
        if self.leader_alive(i) || self.regions[i].gone {
            return;
        }
        let peers = &self.regions[i].region.peers;
        let alive = |p: &Peer| self.stores[(p.store_id - 1) as usize].alive;
        let live: Vec<u64> = peers
            .iter()
            .filter(|p| p.role != PeerRole::Learner && alive(p))
            .map(|p| p.id)
            .collect();
        // A majority of voters must be alive to elect; in a joint state, a majority of the
        // incoming voters and one of the outgoing ones.
        let quorum = |votes: fn(PeerRole) -> bool| {
            let all = peers.iter().filter(|p| votes(p.role));
            let (n, up) = all.fold((0, 0), |(n, up), p| (n + 1, up + usize::from(alive(p))));
            up > n / 2
        };
        if !quorum(PeerRole::votes_incoming) || !quorum(PeerRole::votes_outgoing) {
            return;
        }
        let peer = live[self.rng.gen_range(0..live.len())];
        self.set_leader(i, peer);
        self.beat_now(i);
    }

    pub(super) fn kill(&mut self, id: u64) {
        let s = (id - 1) as usize;
        if !self.stores[s].alive {
            return;
        }
        self.stores[s].alive = false;
        self.liveness.store_changed(s, self.now);
        let at = self.now + self.scn.timing.election_ms;
        for i in 0..self.regions.len() {
            if self.regions[i]
                .region
                .leader_peer()
                .is_some_and(|p| p.store_id == id)
            {
                self.q.push(at, Event::Elect { region: i as u32 });
            }
        }
    }

    pub(super) fn revive(&mut self, id: u64) {
        let s = (id - 1) as usize;
        if self.stores[s].alive {
            return;
        }
        self.stores[s].alive = true;
        self.stores[s].started_ms = self.now;
        self.liveness.store_changed(s, self.now);
        self.q.push(self.now, Event::StoreBeat { store: s as u32 });
        let at = self.now + self.scn.timing.election_ms;
        for i in 0..self.regions.len() {
            if !self.leader_alive(i) {
                self.q.push(at, Event::Elect { region: i as u32 });
            }
        }
    }
}
