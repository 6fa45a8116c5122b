//! Connection steering: which core's endpoint the kernel hands a datagram to.
//!
//! Without it, SO_REUSEPORT picks a core by a hash of the 4-tuple: two connections land on one
//! core half the time, and a connection's packets are received on whatever CPU the sender ran
//! on and then woken on another. Here each core's connection IDs carry its index, and a classic
//! BPF program on the reuseport group sends:
//! - a packet whose destination connection ID is one of ours to the core in it, so every packet
//!   of a connection reaches the endpoint that holds it, whatever the 4-tuple hash would say;
//! - a packet with an ID the client chose (its first Initial, or 0-RTT) to the core pinned to
//!   the CPU the packet was received on, so a new connection is served where its packets
//!   arrive (on loopback, the client's own CPU; on a NIC, the RSS queue's).
//!
//! This module owns the connection ID layout and the program; binding the sockets is
//! `socket.rs`, and the endpoints are `core.rs`. The core index in an ID is in plain text
//! (QUIC-LB's "plaintext" mode): an observer learns which core serves a connection, nothing
//! that links one connection's IDs apart from that.

use std::time::Duration;

use quinn_proto::{ConnectionId, ConnectionIdGenerator, InvalidCid};

/// Our connection IDs: `[MARK, core]` and then quinn's keyed 8-byte ID, so the endpoint can
/// still tell its own IDs from garbage (and answer only those with a stateless reset).
pub const CID_LEN: usize = 10;
/// Tells our IDs from a client's random ones (a client's that happens to start with it is
/// steered by its second byte: still the same core for every packet carrying it).
pub const MARK: u8 = 0x4d;

/// Generates one core's connection IDs.
pub struct CoreCids {
    core: u8,
    keyed: quinn_proto::HashedConnectionIdGenerator,
}

impl CoreCids {
    /// Core `core`'s generator; `key` is the endpoint secret's, the same on every core.
    pub fn new(core: usize, key: u64) -> CoreCids {
        CoreCids {
            core: core as u8,
            keyed: quinn_proto::HashedConnectionIdGenerator::from_key(key),
        }
    }
}

impl ConnectionIdGenerator for CoreCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut id = [0u8; CID_LEN];
        id[0] = MARK;
        id[1] = self.core;
        id[2..].copy_from_slice(&self.keyed.generate_cid());
        ConnectionId::new(&id)
    }

    fn validate(&self, cid: &ConnectionId) -> Result<(), InvalidCid> {
        match cid.len() == CID_LEN && cid[0] == MARK {
            true => self.keyed.validate(&ConnectionId::new(&cid[2..])),
            false => Err(InvalidCid),
        }
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// The kernel's classic BPF instruction (`struct sock_filter`).
pub type Insn = libc::sock_filter;

const LDB_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
const LDW_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const MOD_K: u16 = (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16;
const RET_A: u16 = (libc::BPF_RET | libc::BPF_A) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
/// `ld #cpu`: the CPU the packet is being received on.
const AD_CPU: u32 = (libc::SKF_AD_OFF + libc::SKF_AD_CPU) as u32;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

/// The steering program for `cores` sockets, core `i` pinned to CPU `cpus[i % cpus.len()]`
/// (an empty `cpus` when cores are not pinned: then a new connection goes by CPU modulo
/// `cores`). The packet as the program sees it starts at the UDP payload; a load past its end
/// ends the program with 0, the first core, which is as good as any for a runt.
pub fn program(cores: usize, cpus: &[usize]) -> Vec<Insn> {
    let n = cores.clamp(1, 256) as u32;
    // Where the by-CPU part starts: the jumps for "not one of our IDs" land here.
    const BY_CPU: u8 = 14;
    let mark = u32::from(MARK);
    let mut p = vec![
        /* 0 */ insn(LDB_ABS, 0, 0, 0),
        // A long header (Initial, 0-RTT, Handshake) has its flags' top bit set.
        /* 1 */
        insn(JSET_K, 7 - 2, 0, 0x80),
        // Short header: the destination ID starts at byte 1.
        /* 2 */
        insn(LDB_ABS, 0, 0, 1),
        /* 3 */ insn(JEQ_K, 0, BY_CPU - 4, mark),
        /* 4 */ insn(LDB_ABS, 0, 0, 2),
        /* 5 */ insn(MOD_K, 0, 0, n),
        /* 6 */ insn(RET_A, 0, 0, 0),
        // Long header: flags, version (4 bytes), ID length, ID.
        /* 7 */
        insn(LDB_ABS, 0, 0, 5),
        /* 8 */ insn(JGE_K, 0, BY_CPU - 9, 2),
        /* 9 */ insn(LDB_ABS, 0, 0, 6),
        /* 10 */ insn(JEQ_K, 0, BY_CPU - 11, mark),
        /* 11 */ insn(LDB_ABS, 0, 0, 7),
        /* 12 */ insn(MOD_K, 0, 0, n),
        /* 13 */ insn(RET_A, 0, 0, 0),
        // A client's ID: the core pinned to the receiving CPU.
        /* 14 */
        insn(LDW_ABS, 0, 0, AD_CPU),
    ];
    debug_assert_eq!(p.len(), usize::from(BY_CPU) + 1);
    let mut seen = std::collections::HashSet::new();
    if !cpus.is_empty() {
        for core in 0..n as usize {
            let cpu = cpus[core % cpus.len()] as u32;
            // The first core pinned to a CPU takes its new connections.
            if seen.insert(cpu) {
                p.push(insn(JEQ_K, 0, 1, cpu));
                p.push(insn(RET_K, 0, 0, core as u32));
            }
        }
    }
    p.push(insn(MOD_K, 0, 0, n));
    p.push(insn(RET_A, 0, 0, 0));
    p
}

/// SO_ATTACH_REUSEPORT_CBPF (asm-generic; not in the libc crate for every target).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;

/// Attaches `program` to the reuseport group `socket` belongs to.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn attach(socket: &std::net::UdpSocket, program: &[Insn]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut Insn,
    };
    // SAFETY: `prog` points at `program`, which outlives the call; the kernel copies it.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
            &prog as *const libc::sock_fprog as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn attach(_socket: &std::net::UdpSocket, _program: &[Insn]) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "steering is built for x86_64 and aarch64 only",
    ))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Runs a classic BPF program the way the kernel's reuseport hook does: `packet` is the UDP
    /// payload, a load past its end returns 0, and the result picks a socket.
    fn run(program: &[Insn], packet: &[u8], cpu: u32) -> u32 {
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = program[pc];
            pc += 1;
            match i.code {
                LDB_ABS => match packet.get(i.k as usize) {
                    Some(b) => a = u32::from(*b),
                    None => return 0,
                },
                LDW_ABS if i.k == AD_CPU => a = cpu,
                JSET_K | JEQ_K | JGE_K => {
                    let taken = match i.code {
                        JSET_K => a & i.k != 0,
                        JEQ_K => a == i.k,
                        _ => a >= i.k,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                MOD_K => a %= i.k,
                RET_A => return a,
                RET_K => return i.k,
                other => panic!("instruction {other:#x} not expected"),
            }
        }
    }

    fn our_cid(core: usize) -> Vec<u8> {
        CoreCids::new(core, 7).generate_cid().to_vec()
    }

    fn short(cid: &[u8]) -> Vec<u8> {
        let mut p = vec![0x40];
        p.extend_from_slice(cid);
        p.extend_from_slice(&[0xaa; 20]);
        p
    }

    fn long(cid: &[u8]) -> Vec<u8> {
        let mut p = vec![0xc0, 0, 0, 0, 1, cid.len() as u8];
        p.extend_from_slice(cid);
        p.extend_from_slice(&[8, 1, 2, 3, 4, 5, 6, 7, 8]);
        p
    }

    #[test]
    fn our_ids_go_to_their_core_and_a_clients_to_the_receiving_cpus_core() {
        // Four cores pinned to CPUs 2, 3, 4, 5.
        let p = program(4, &[2, 3, 4, 5]);
        for core in 0..4 {
            for cpu in 0..8 {
                assert_eq!(run(&p, &short(&our_cid(core)), cpu), core as u32);
                assert_eq!(run(&p, &long(&our_cid(core)), cpu), core as u32);
            }
        }
        let client = [0x13, 9, 9, 9, 9, 9, 9, 9];
        assert_eq!(run(&p, &long(&client), 4), 2, "CPU 4 hosts core 2");
        assert_eq!(run(&p, &long(&client), 2), 0);
        assert_eq!(run(&p, &long(&client), 7), 3, "no core on CPU 7: 7 mod 4");
        assert_eq!(run(&p, &long(&[]), 5), 3, "an empty ID goes by CPU");
        assert_eq!(run(&p, &[], 5), 0, "a runt goes to the first core");
    }

    #[test]
    fn more_cores_than_cpus_and_unpinned_cores() {
        let p = program(4, &[0, 1]);
        assert_eq!(run(&p, &long(&[1; 8]), 1), 1, "CPU 1's first core");
        assert_eq!(run(&p, &short(&our_cid(3)), 0), 3);
        let unpinned = program(2, &[]);
        assert_eq!(run(&unpinned, &long(&[1; 8]), 5), 1);
    }

    #[test]
    fn an_endpoint_knows_its_ids_from_any_core_and_no_others() {
        let mut core0 = CoreCids::new(0, 42);
        let core1 = CoreCids::new(1, 42);
        let id = core0.generate_cid();
        assert_eq!(id.len(), CID_LEN);
        assert!(
            core1.validate(&id).is_ok(),
            "the same secret: a misrouted id is ours"
        );
        let mut forged = id.to_vec();
        forged[CID_LEN - 1] ^= 1;
        assert!(core1.validate(&ConnectionId::new(&forged)).is_err());
        assert!(
            CoreCids::new(0, 43).validate(&id).is_err(),
            "another node's secret"
        );
        assert!(core1.validate(&ConnectionId::new(&id[1..])).is_err());
    }

    proptest! {
        /// Whatever arrives, the program ends on a socket of the group; a packet carrying one of
        /// our IDs reaches the core that issued it on every CPU; anything else depends on the
        /// CPU alone, so a client's retransmitted Initial goes where the first one went.
        #[test]
        fn every_packet_lands_on_a_core(
            cores in 1usize..12,
            cpus in proptest::collection::vec(0usize..64, 0..12),
            packet in proptest::collection::vec(any::<u8>(), 0..40),
            cpu in 0u32..64,
            core in 0usize..12,
        ) {
            let p = program(cores, &cpus);
            prop_assert!(run(&p, &packet, cpu) < cores as u32);
            let core = core % cores;
            prop_assert_eq!(run(&p, &short(&our_cid(core)), cpu), core as u32);
            prop_assert_eq!(run(&p, &long(&our_cid(core)), cpu), core as u32);
            if packet.len() > 8 && packet[0] & 0x80 != 0 && packet[6] != MARK {
                let mut again = packet.clone();
                let last = 20.min(again.len() - 1);
                again[last] ^= 0xff;
                prop_assert_eq!(run(&p, &packet, cpu), run(&p, &again, cpu));
            }
        }
    }
}
