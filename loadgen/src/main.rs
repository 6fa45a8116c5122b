//! `loadgen`: drives a Meridian cluster with real clients and checks what comes back.

use clap::{Parser, Subcommand};
use loadgen::{cluster, compare, demo, route, run};

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
    Tso(run::TsoArgs),
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
    tso: run::TsoArgs,
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

async fn run_compare(args: CompareArgs) -> anyhow::Result<compare::Comparison> {
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
