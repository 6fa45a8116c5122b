//! `loadgen`: drives a Meridian cluster with real clients and checks what comes back.

use clap::{Parser, Subcommand};
use loadgen::{
    args, attack, cluster, compare, demo, etcd_load, nemesis, route, run, sim, token_buckets,
};

#[derive(Parser)]
#[command(
    name = "loadgen",
    version,
    about = "Load generator and checker for Meridian"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// TSO (or ping) load against running members.
    Tso(args::TsoArgs),
    /// Start a local single-node server, run `tso` against it, stop it.
    Demo(DemoArgs),
    /// Alternate `--op ping` and `--op tso-raw` rounds and report the throughput ratio
    /// (against --endpoints, or a local demo server when none are given).
    Compare(CompareArgs),
    /// Simulated stores and regions: bootstrap, split to --regions, then region and store
    /// heartbeats.
    Cluster(cluster::ClusterArgs),
    /// GetRegion by random key.
    Route(route::RouteArgs),
    /// AcquireTokenBuckets grants on the leader's ResourceManager, over many streams
    /// (against --endpoints, or a local demo server when none are given).
    TokenBuckets(token_buckets::TokenBucketArgs),
    /// TSO throughput under attack (handshake, connection and stream floods, oversized keys,
    /// admin slowloris) next to quiet runs, alternated, against a local demo server.
    Attack(AttackArgs),
    /// Three members on an etcd (from PATH) under TSO, id and split load, with random faults
    /// (SIGKILL, leader pauses, etcd partitions, clock jumps, transfers); checks every promise
    /// at the end and exits non-zero on any broken one.
    Nemesis(nemesis::NemesisArgs),
    /// Open-loop puts and ranges at offered rates, and a watch, against one etcd v3 endpoint
    /// over TLS (etcd, or a Meridian node's client address): put, range and watch-delivery
    /// latency. `scripts/bench-all ab-etcd-proxy` alternates it straight and through a node.
    Etcd(etcd_load::EtcdLoadArgs),
    /// The deterministic cluster simulator: a scenario (lost-store, decommission, scale-out,
    /// zone-loss, rolling-restart, merge, or a TOML file) run by Meridian's scheduling core in
    /// simulated time; fails on any safety violation or if it does not converge.
    Sim(sim::SimArgs),
}

#[derive(clap::Args)]
struct AttackArgs {
    /// The attacks to run, in this order each round.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "handshakes,connections,streams,oversized-keys,slowloris"
    )]
    kinds: Vec<attack::Attack>,
    /// Rounds; each runs the TSO load quiet and beside every attack. Medians are compared.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[command(flatten)]
    demo: DemoArgs,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// Rounds of each op; the medians are compared.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[command(flatten)]
    demo: DemoArgs,
}

#[derive(clap::Args)]
struct DemoArgs {
    #[command(flatten)]
    server: demo::ServerSetup,
    #[command(flatten)]
    tso: args::TsoArgs,
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // Each command yields the number of violations its checker found.
    let result = runtime.block_on(async {
        match cli.command {
            Command::Tso(args) => report(run::run(&args).await?, args.json.as_deref()),
            Command::Demo(args) => {
                let json = args.tso.json.clone();
                let r = demo::run(args.tso, &args.server).await?;
                report(r, json.as_deref())
            }
            Command::Compare(args) => Ok(run_compare(args).await?.violations),
            Command::Cluster(args) => cluster::run(&args).await.map(|_| 0),
            Command::Route(args) => route::run(&args).await.map(|_| 0),
            Command::TokenBuckets(args) => token_buckets::run_and_report(&args).await,
            Command::Attack(args) => run_attack(args).await,
            Command::Etcd(args) => {
                let r = etcd_load::run(&args).await?;
                Ok(u64::from(r.errors > 0))
            }
            Command::Nemesis(args) => {
                let r = nemesis::run(&args).await?;
                r.print();
                if let Some(path) = &args.json {
                    std::fs::write(path, serde_json::to_vec_pretty(&r)?)?;
                }
                Ok(r.failures())
            }
            Command::Sim(args) => sim::run(&args),
        }
    });
    match result {
        Ok(0) => std::process::ExitCode::SUCCESS,
        Ok(violations) => {
            eprintln!("FAILED: {violations} violations");
            std::process::ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn report(r: loadgen::report::Report, json: Option<&std::path::Path>) -> anyhow::Result<u64> {
    r.print();
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_vec_pretty(&r)?)?;
    }
    Ok(r.violations)
}

/// `--plot` draws one run: `compare` and `attack` make many.
fn no_plot(args: &args::TsoArgs, command: &str) -> anyhow::Result<()> {
    if args.plot.is_some() {
        anyhow::bail!("--plot is for tso, demo, cluster and route runs, not {command}");
    }
    Ok(())
}

async fn run_compare(args: CompareArgs) -> anyhow::Result<compare::Comparison> {
    no_plot(&args.demo.tso, "compare")?;
    let mut tso = args.demo.tso.clone();
    let demo = if tso.endpoints.is_empty() {
        let d = demo::DemoServer::start(&args.demo.server).await?;
        d.target(&mut tso);
        Some(d)
    } else {
        None
    };
    let result = compare::run(&tso, args.rounds).await;
    if let Some(d) = demo {
        d.stop().await?;
    }
    let c = result?;
    println!(
        "median: ping {:.0}/s, tso-raw {:.0}/s, ratio {:.3} ({} violations, {} errors)",
        c.median_ping_per_sec, c.median_tso_raw_per_sec, c.ratio, c.violations, c.errors
    );
    if let Some(path) = &tso.json {
        std::fs::write(path, serde_json::to_vec_pretty(&c)?)?;
    }
    Ok(c)
}

async fn run_attack(args: AttackArgs) -> anyhow::Result<u64> {
    no_plot(&args.demo.tso, "attack")?;
    if !args.demo.tso.endpoints.is_empty() {
        anyhow::bail!("attack runs against its own local server: drop --endpoints");
    }
    let demo = demo::DemoServer::start(&args.demo.server).await?;
    let result = attack::run(args.demo.tso.clone(), &demo, &args.kinds, args.rounds).await;
    demo.stop().await?;
    let r = result?;
    println!(
        "quiet: median {:.0} ts/s over {} runs, node {:.2} cores",
        r.median_quiet_tso_per_sec,
        r.quiet_tso_per_sec.len(),
        compare::median(&r.quiet_server_cores)
    );
    for a in &r.attacks {
        println!(
            "{:?}: median {:.0} ts/s, {:.3} of quiet, node {:.2} cores ({} attempts, {} refused or cut off)",
            a.kind,
            a.median_tso_per_sec,
            a.ratio,
            compare::median(&a.server_cores),
            a.effect.attempts,
            a.effect.refused
        );
    }
    println!("{} violations, {} errors", r.violations, r.errors);
    if let Some(path) = &args.demo.tso.json {
        std::fs::write(path, serde_json::to_vec_pretty(&r)?)?;
    }
    Ok(r.violations)
}
