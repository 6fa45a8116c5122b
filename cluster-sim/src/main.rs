//! `cluster-sim`: runs seeds of the cluster simulation from the command line.
//! `cluster-sim --seeds N [--from S] [--members 3|5] [--no-faults] [--no-etcd-faults]
//! [--no-placement] [--mutation NAME]` runs seeds S..S+N (etcd's faults and the placement client
//! on unless turned off; `--etcd-faults` and `--placement` are still accepted and change
//! nothing) and prints the first failing seed; `cluster-sim --seed S --trace F` runs one seed and writes its
//! trace to F (the same seed writes the same file); `cluster-sim --list-mutations` prints the
//! deliberate bugs, one name a line. Owns argument handling and printing only.

use std::process::ExitCode;
use std::time::Instant;

use cluster_sim::{run, Mutation, SimConfig};

// The server's allocator: a seed allocates and frees for every message its hosts exchange, and
// glibc's malloc was ~4% of a seed's samples.
meridian::install_allocator!();

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let number = |flag: &str, default: u64| match value(flag) {
        Some(v) => v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}")),
        None => Ok(default),
    };
    if args.iter().any(|a| a == "--list-mutations") {
        for m in Mutation::ALL {
            println!("{}", m.name());
        }
        return ExitCode::SUCCESS;
    }
    let faults = !args.iter().any(|a| a == "--no-faults");
    let etcd_faults = !args.iter().any(|a| a == "--no-etcd-faults");
    let placement = !args.iter().any(|a| a == "--no-placement");
    let mutation = match value("--mutation") {
        None => None,
        Some(name) => match Mutation::ALL.into_iter().find(|m| m.name() == name) {
            Some(m) => Some(m),
            None => {
                eprintln!("no mutation named {name} (see --list-mutations)");
                return ExitCode::from(2);
            }
        },
    };
    let parsed = (|| -> Result<(u64, u64, Option<String>), String> {
        match value("--seed") {
            Some(_) => Ok((number("--seed", 0)?, 1, value("--trace"))),
            None => Ok((
                number("--from", 0)?,
                number("--seeds", 1)?,
                value("--trace"),
            )),
        }
    })();
    let (from, count, trace) = match parsed {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let members = match number("--members", 3) {
        Ok(n) if (1..=5).contains(&n) => n as usize,
        Ok(n) => {
            eprintln!("--members {n}: from 1 to 5");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let mut violations = 0usize;
    for seed in from..from + count {
        let outcome = run(&SimConfig {
            faults,
            mutation,
            members,
            etcd_faults,
            placement,
            ..SimConfig::seed(seed)
        });
        if let Some(path) = &trace {
            if let Err(e) = std::fs::write(path, outcome.trace.text()) {
                eprintln!("writing {path}: {e}");
                return ExitCode::from(2);
            }
        }
        if !outcome.violations.is_empty() {
            if violations == 0 {
                println!("failing_seed={seed}");
            }
            for v in &outcome.violations {
                println!("seed {seed}: {v}");
            }
        }
        violations += outcome.violations.len();
        eprintln!(
            "seed {seed}: handed_out={} violations={}",
            outcome.handed_out,
            outcome.violations.len()
        );
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "seeds={count} violations={violations} seeds_per_sec={:.2}",
        count as f64 / secs.max(1e-9)
    );
    if violations > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
