//! The `meridian` binary: `serve` runs a node; `ctl` talks to a running one.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use meridian::admin::AdminClient;
use meridian::client::{Client, ClientOptions};
use meridian::config::Config;
use meridian::server::{self, ServeOptions};
use meridian::tls::Trust;

meridian::install_allocator!();

#[derive(Parser)]
#[command(
    name = "meridian",
    version,
    about = "Meridian placement driver and timestamp oracle"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node.
    Serve(ServeArgs),
    /// Query a running node.
    Ctl(CtlArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Member name, unique in the cluster.
    #[arg(long, default_value = "meridian-0")]
    name: String,
    /// QUIC address for clients (UDP).
    #[arg(long, default_value = "127.0.0.1:2379")]
    listen: SocketAddr,
    /// Admin HTTP address.
    #[arg(long, default_value = "127.0.0.1:2380")]
    admin_listen: SocketAddr,
    /// `host:port` other members and clients reach the QUIC port at (default: the bound
    /// address; set it when listening on 0.0.0.0, e.g. a pod's DNS name).
    #[arg(long)]
    advertise_client: Option<String>,
    /// `host:port` other members reach the admin API at (default: the bound address).
    #[arg(long)]
    advertise_admin: Option<String>,
    /// Where the embedded store and the TLS pair live.
    #[arg(long)]
    data_dir: PathBuf,
    /// Comma-separated etcd endpoints; without it the node runs alone on the embedded store.
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
    /// Cores to serve on (default: every CPU this process may use).
    #[arg(long)]
    cores: Option<usize>,
    /// TOML config file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// PEM certificate chain; without it a self-signed pair is created in DATA_DIR/tls.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The PD-compatible gRPC front end (`pdpb.PD`): `client` (TCP at --listen), an address,
    /// or `off`.
    #[arg(long, default_value = "client")]
    grpc_listen: server::GrpcListen,
}

#[derive(clap::Args)]
struct CtlArgs {
    /// A member's admin HTTP address (host:port), for members and leader.
    #[arg(long)]
    admin: Option<String>,
    /// Members' client addresses (host:port), for tso.
    #[arg(long, value_delimiter = ',')]
    endpoints: Vec<String>,
    /// The server's certificate or its CA (DATA_DIR/tls/ca.pem for a self-signed server).
    #[arg(long, conflicts_with = "insecure")]
    ca: Option<PathBuf>,
    /// Skip certificate verification.
    #[arg(long)]
    insecure: bool,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Subcommand)]
enum CtlCommand {
    /// List the members and which one leads (admin API).
    Members,
    /// Show the leader (admin API).
    Leader,
    /// Hand leadership to the named member (send to the leader's admin API).
    TransferLeader { name: String },
    /// Make the leader step down (send to the leader's admin API).
    Resign,
    /// Remove a member from the cluster for good (it stops campaigning).
    DeleteMember { name: String },
    /// Ask the cluster for one timestamp (QUIC, through the client).
    Tso,
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match Cli::parse().command {
        Command::Serve(args) => serve(args),
        Command::Ctl(args) => ctl(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    server::run(ServeOptions {
        name: args.name,
        listen: args.listen,
        admin_listen: args.admin_listen,
        advertise_client: args.advertise_client,
        advertise_admin: args.advertise_admin,
        data_dir: args.data_dir,
        cores: args.cores.unwrap_or_else(server::available_cores),
        config: Config::load(args.config.as_deref())?,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        etcd: args.etcd,
        grpc_listen: args.grpc_listen,
    })
}

fn ctl(args: CtlArgs) -> anyhow::Result<()> {
    match args.command {
        CtlCommand::Tso => tso(args),
        command => {
            let admin = args
                .admin
                .ok_or_else(|| anyhow::anyhow!("pass --admin HOST:PORT"))?;
            let client = AdminClient::new(&admin);
            let (path, (status, body)) = match command {
                CtlCommand::Members => (
                    "/api/v1/members".to_string(),
                    client.get("/api/v1/members")?,
                ),
                CtlCommand::TransferLeader { name } => {
                    let path = format!("/api/v1/leader/transfer/{name}");
                    let answer = client.post(&path)?;
                    (path, answer)
                }
                CtlCommand::DeleteMember { name } => {
                    let path = format!("/api/v1/members/{name}");
                    let answer = client.delete(&path)?;
                    (path, answer)
                }
                CtlCommand::Resign => (
                    "/api/v1/leader/resign".to_string(),
                    client.post("/api/v1/leader/resign")?,
                ),
                _ => ("/api/v1/leader".to_string(), client.get("/api/v1/leader")?),
            };
            match serde_json::from_str::<serde_json::Value>(&body) {
                Ok(json) => println!("{}", serde_json::to_string_pretty(&json)?),
                Err(_) => println!("{body}"),
            }
            if status != 200 {
                anyhow::bail!("{path} answered {status}");
            }
            Ok(())
        }
    }
}

fn tso(args: CtlArgs) -> anyhow::Result<()> {
    let trust = match (args.ca, args.insecure) {
        (Some(ca), false) => Trust::Ca(ca),
        (None, true) => Trust::Insecure,
        _ => {
            anyhow::bail!("pass --ca FILE (the server's DATA_DIR/tls/ca.pem) or --insecure")
        }
    };
    if args.endpoints.is_empty() {
        anyhow::bail!("pass --endpoints HOST:PORT");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = Client::connect(ClientOptions::new(args.endpoints, trust)).await?;
        let ts = client.get_ts().await?;
        println!(
            "{} (physical_ms={} logical={})",
            ts.as_u64(),
            ts.physical_ms(),
            ts.logical()
        );
        anyhow::Ok(())
    })
}
