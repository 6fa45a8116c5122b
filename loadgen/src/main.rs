//! `loadgen`: drives a Meridian cluster with real clients and checks what comes back.

use clap::{Parser, Subcommand};
use loadgen::{demo, run};

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
}

#[derive(clap::Args)]
struct DemoArgs {
    /// Cores for the demo server (default: all).
    #[arg(long)]
    server_cores: Option<usize>,
    /// Config file for the demo server (`meridian serve --config`).
    #[arg(long)]
    server_config: Option<std::path::PathBuf>,
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
    let result = runtime.block_on(async {
        let (report, json) = match cli.command {
            Command::Tso(args) => (run::run(&args).await?, args.json),
            Command::Demo(args) => (
                demo::run(
                    args.tso.clone(),
                    args.server_cores,
                    args.server_config.clone(),
                )
                .await?,
                args.tso.json,
            ),
        };
        report.print();
        if let Some(path) = json {
            std::fs::write(&path, serde_json::to_vec_pretty(&report)?)?;
        }
        anyhow::Ok(report)
    });
    match result {
        Ok(report) if report.violations == 0 => std::process::ExitCode::SUCCESS,
        Ok(report) => {
            eprintln!("FAILED: {} violations", report.violations);
            std::process::ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
