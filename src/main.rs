//! The `meridian` binary: `serve` runs a node; `ctl` talks to a running one.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use meridian::admin::AdminClient;
use meridian::client::{Client, ClientOptions};
use meridian::config::Config;
use meridian::ctl;
use meridian::meta::{EtcdAccess, EtcdAccessFlags, PASSWORD_ENV};
use meridian::server::{self, ServeOptions};
use meridian::tls::{cert, Trust};
use meridian::tso::Timestamp;

meridian::install_allocator!();

#[derive(Parser)]
#[command(
    name = "meridian",
    version,
    about = "Meridian placement driver and timestamp oracle"
)]
struct Cli {
    /// Log lines as text, or as one JSON object per line for log shippers. The level comes
    /// from RUST_LOG (default `info`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node.
    // Boxed: with its many flags it dwarfs the other variants.
    Serve(Box<ServeArgs>),
    /// Query a running node.
    Ctl(CtlArgs),
    /// Make a cluster's certificates: a CA, node certificates, client certificates with a role.
    Cert(CertArgs),
}

#[derive(clap::Args)]
struct CertArgs {
    /// Where ca.pem and the certificates made are written.
    #[arg(long)]
    certs_dir: PathBuf,
    /// The CA's private key: written by create-ca, read by the others. Keep it off the nodes.
    #[arg(long)]
    ca_key: PathBuf,
    /// How long the certificate made is valid, in days [default: 3650 for a CA, 1825 for
    /// node and client certificates].
    #[arg(long)]
    days: Option<u32>,
    #[command(subcommand)]
    command: CertCommand,
}

// The verbs are CockroachDB's (`cert create-ca`, ...), which users of secure clusters know.
#[allow(clippy::enum_variant_names)]
#[derive(Subcommand)]
enum CertCommand {
    /// A new CA: CERTS_DIR/ca.pem and the key at --ca-key.
    CreateCa,
    /// A member's certificate for HOSTS (names or addresses clients dial): node.pem, node-key.pem.
    /// With --role store or client: a TiKV store's or a TiDB server's certificate, valid for
    /// both serving under HOSTS and calling Meridian (TiKV and TiDB use one certificate for
    /// both): <name>.pem and <name>-key.pem.
    CreateNode {
        #[arg(required = true)]
        hosts: Vec<String>,
        /// The role the certificate carries instead of `member`: `store` (TiKV) or `client`
        /// (TiDB).
        #[arg(long, value_enum)]
        role: Option<cert::Role>,
        /// File name and common name of a --role certificate [default: the role's name].
        #[arg(long, requires = "role")]
        name: Option<String>,
        /// The one store a `store` certificate may act for under `[security]
        /// bind-store-identity` (a `meridian://store/ID` SAN).
        #[arg(long, requires = "role")]
        store_id: Option<u64>,
    },
    /// A client certificate carrying ROLE: <name>.pem and <name>-key.pem (default name `client`,
    /// the file names PD clients' TLS settings use).
    CreateClient {
        #[arg(long, value_enum)]
        role: cert::Role,
        #[arg(long, default_value = "client")]
        name: String,
    },
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
    /// `https://` endpoints need --etcd-ca.
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
    /// PEM CA that signed etcd's server certificate: turns TLS to etcd on.
    #[arg(long)]
    etcd_ca: Option<PathBuf>,
    /// PEM client certificate presented to etcd (for etcd's --client-cert-auth).
    #[arg(long, requires = "etcd_key")]
    etcd_cert: Option<PathBuf>,
    /// PEM private key of --etcd-cert.
    #[arg(long, requires = "etcd_cert")]
    etcd_key: Option<PathBuf>,
    /// etcd user (etcd auth enabled). The password comes from --etcd-password-file or the
    /// MERIDIAN_ETCD_PASSWORD environment variable, never from the command line.
    #[arg(long)]
    etcd_user: Option<String>,
    /// File holding the --etcd-user password (one trailing newline is ignored).
    #[arg(long, requires = "etcd_user")]
    etcd_password_file: Option<PathBuf>,
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
    /// The CA whose client certificates are let in, on every port (default: ca.pem beside
    /// --tls-cert, or DATA_DIR/tls/ca.pem for the local CA).
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// Turn client authentication off on every port: anyone who reaches the node may do
    /// anything. For experiments only; the node says so loudly.
    #[arg(long, conflicts_with = "tls_ca")]
    insecure_no_client_auth: bool,
    /// Let /health, /ready and /metrics answer admin clients that present no certificate
    /// (kubelet probes, scrapers); every other admin route still needs one.
    #[arg(long)]
    admin_open_probes: bool,
    /// The PD-compatible gRPC front end (`pdpb.PD`): `client` (TCP at --listen), an address,
    /// or `off`.
    #[arg(long, default_value = "client")]
    grpc_listen: server::GrpcListen,
}

#[derive(clap::Args)]
struct CtlArgs {
    /// A member's admin HTTP address (host:port), for members, transfer-leader, resign and
    /// delete-member (and leader, when given).
    #[arg(long)]
    admin: Option<String>,
    /// Members' client addresses (host:port), for the verbs that read the cluster.
    #[arg(long, value_delimiter = ',')]
    endpoints: Vec<String>,
    /// The server's certificate or its CA (DATA_DIR/tls/ca.pem for a local node).
    #[arg(long, conflicts_with = "insecure")]
    ca: Option<PathBuf>,
    /// The client certificate to present (default: client.pem beside --ca, if there).
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// The key of --cert (default: client-key.pem beside --ca).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Skip certificate verification (and present no certificate).
    #[arg(long)]
    insecure: bool,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Subcommand)]
enum CtlCommand {
    /// List the members with their health and which one leads (admin API).
    Members,
    /// Show the leader (admin API with --admin, else asked over --endpoints).
    Leader,
    /// Hand leadership to the named member (send to the leader's admin API).
    TransferLeader { name: String },
    /// Make the leader step down (send to the leader's admin API).
    Resign,
    /// Remove a member from the cluster for good (it stops campaigning).
    DeleteMember { name: String },
    /// Take one timestamp, or `tso decode TS` to split one into wall time and logical.
    Tso {
        #[command(subcommand)]
        action: Option<TsoAction>,
    },
    /// The region holding KEY; `region id N`; `region scan START [END] --limit N`.
    Region(RegionArgs),
    /// One store by id (its state, and the regions left while it drains); `store delete ID`;
    /// `store limit [ID|all RATE [--type add-peer|remove-peer]]`.
    Store(StoreArgs),
    /// `scheduler show`; `scheduler add evict-leader STORE`; `scheduler remove
    /// evict-leader STORE` (or `evict-leader-scheduler-STORE`).
    Scheduler {
        #[command(subcommand)]
        action: SchedulerAction,
    },
    /// pd-ctl's `operator`: `show [KIND]`; `check REGION`; `add transfer-leader REGION STORE`
    /// (and pd-ctl's other operators); `remove REGION`; `history [START]`.
    Operator {
        #[command(subcommand)]
        action: ctl::operator::OperatorAction,
    },
    /// Every store.
    Stores,
    /// The members as the cluster reports them, and the leader.
    Member,
    /// Cluster id, whether it is bootstrapped, and the counts of members, stores and regions.
    Cluster,
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
struct StoreArgs {
    id: Option<u64>,
    #[command(subcommand)]
    action: Option<StoreAction>,
}

#[derive(Subcommand)]
enum StoreAction {
    /// Decommission a store: Offline, drained, then Tombstone (PD's `store delete`).
    Delete { id: u64 },
    /// Every store's limits (peers per minute); with a store id (or `all`) and a rate, sets them.
    Limit {
        store: Option<String>,
        rate: Option<f64>,
        /// `add-peer` or `remove-peer`; both when not given.
        #[arg(long = "type")]
        kind: Option<String>,
    },
}

#[derive(Subcommand)]
enum SchedulerAction {
    /// The schedulers running.
    Show,
    /// Add a scheduler: `evict-leader STORE`.
    Add { name: String, store: Option<u64> },
    /// Remove one: `evict-leader STORE` or `evict-leader-scheduler-STORE`.
    Remove { name: String, store: Option<u64> },
}

#[derive(Subcommand)]
enum TsoAction {
    /// Physical time (UTC) and logical counter of a timestamp.
    Decode { ts: u64 },
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
struct RegionArgs {
    /// The key (text; hex with --hex).
    key: Option<String>,
    /// Keys are hex.
    #[arg(long)]
    hex: bool,
    #[command(subcommand)]
    by: Option<RegionBy>,
}

#[derive(Subcommand)]
enum RegionBy {
    /// A region by its id.
    Id { id: u64 },
    /// Regions overlapping [START, END) (no END: to the end of the key space).
    Scan {
        start: String,
        #[arg(default_value = "")]
        end: String,
        #[arg(long, default_value_t = 16)]
        limit: usize,
        /// Keys are hex.
        #[arg(long)]
        hex: bool,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let result = match cli.command {
        Command::Serve(args) => serve(*args),
        Command::Ctl(args) => ctl(args),
        Command::Cert(args) => cert_command(args),
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
    if meridian::failpoint::compiled_in() {
        tracing::warn!(
            "this build has failpoints compiled in (feature `failpoints`): for tests only"
        );
    }
    meridian::failpoint::arm_from_env().map_err(|e| anyhow::anyhow!("FAILPOINTS: {e}"))?;
    // Read and checked before anything binds, so a bad file fails the start naming its flag.
    let etcd_access = EtcdAccess::from_flags(
        EtcdAccessFlags {
            ca: args.etcd_ca,
            cert: args.etcd_cert,
            key: args.etcd_key,
            user: args.etcd_user,
            password_file: args.etcd_password_file,
        },
        match std::env::var(PASSWORD_ENV) {
            Ok(password) => Some(password),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => anyhow::bail!("{PASSWORD_ENV} is not UTF-8"),
        },
    )?;
    etcd_access.check_endpoints(&args.etcd)?;
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
        tls_ca: args.tls_ca,
        insecure_no_client_auth: args.insecure_no_client_auth,
        admin_open_probes: args.admin_open_probes,
        etcd: args.etcd,
        etcd_access,
        grpc_listen: args.grpc_listen,
    })
}

fn ctl(args: CtlArgs) -> anyhow::Result<()> {
    match &args.command {
        CtlCommand::Tso {
            action: Some(TsoAction::Decode { ts }),
        } => return print(args.json, ctl::tso_decode(Timestamp::from_u64(*ts))),
        CtlCommand::Leader if args.admin.is_none() => return cluster_read(args),
        CtlCommand::Store(StoreArgs {
            action: Some(_), ..
        })
        | CtlCommand::Scheduler { .. }
        | CtlCommand::Operator { .. } => return scheduling(args),
        CtlCommand::Tso { .. }
        | CtlCommand::Region(_)
        | CtlCommand::Store { .. }
        | CtlCommand::Stores
        | CtlCommand::Member
        | CtlCommand::Cluster => return cluster_read(args),
        CtlCommand::Members
        | CtlCommand::Leader
        | CtlCommand::TransferLeader { .. }
        | CtlCommand::Resign
        | CtlCommand::DeleteMember { .. } => {}
    }
    let admin = args
        .admin
        .ok_or_else(|| anyhow::anyhow!("pass --admin HOST:PORT"))?;
    let trust = Trust::from_flags(args.ca, args.cert, args.key, args.insecure)?;
    let client = AdminClient::new(&admin, &trust)?;
    let (path, (status, body)) = match args.command {
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

fn print(json: bool, shown: ctl::Shown) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&shown.json)?);
    } else {
        println!("{}", shown.text);
    }
    Ok(())
}

/// The verbs that change scheduling, through PD's HTTP API at --endpoints.
fn scheduling(args: CtlArgs) -> anyhow::Result<()> {
    let trust = Trust::from_flags(args.ca, args.cert, args.key, args.insecure)?;
    let at = &args.endpoints;
    let shown = match args.command {
        CtlCommand::Store(StoreArgs {
            action: Some(StoreAction::Delete { id }),
            ..
        }) => ctl::scheduling::store_delete(at, &trust, id)?,
        CtlCommand::Store(StoreArgs {
            action: Some(StoreAction::Limit { store, rate, kind }),
            ..
        }) => match (store, rate) {
            (None, None) => ctl::scheduling::store_limits(at, &trust)?,
            (Some(store), Some(rate)) => {
                let store =
                    match store.as_str() {
                        "all" => None,
                        id => Some(id.parse().map_err(|_| {
                            anyhow::anyhow!("{id:?} is neither a store id nor `all`")
                        })?),
                    };
                ctl::scheduling::set_store_limit(at, &trust, store, rate, kind.as_deref())?
            }
            _ => anyhow::bail!("pass `limit` alone, or a store id (or `all`) and a rate"),
        },
        CtlCommand::Scheduler { action } => match action {
            SchedulerAction::Show => ctl::scheduling::schedulers(at, &trust)?,
            SchedulerAction::Add { name, store } => {
                ctl::scheduling::add_scheduler(at, &trust, &name, store)?
            }
            SchedulerAction::Remove { name, store } => {
                ctl::scheduling::remove_scheduler(at, &trust, &name, store)?
            }
        },
        CtlCommand::Operator { action } => ctl::operator::run(at, &trust, action)?,
        _ => anyhow::bail!("not a scheduling verb"),
    };
    print(args.json, shown)
}

/// The verbs that read the cluster over the QUIC client.
fn cluster_read(args: CtlArgs) -> anyhow::Result<()> {
    let trust = Trust::from_flags(args.ca, args.cert, args.key, args.insecure)?;
    if args.endpoints.is_empty() {
        anyhow::bail!("pass --endpoints HOST:PORT");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let json = args.json;
    let command = args.command;
    let endpoints = args.endpoints;
    rt.block_on(async move {
        let client = Client::connect(ClientOptions::new(endpoints, trust)).await?;
        let shown = match command {
            CtlCommand::Tso { .. } => ctl::tso(&client).await?,
            CtlCommand::Region(r) => match r.by {
                Some(RegionBy::Id { id }) => ctl::region_by_id(&client, id).await?,
                Some(RegionBy::Scan {
                    start,
                    end,
                    limit,
                    hex,
                }) => {
                    let (start, end) = (ctl::parse_key(&start, hex)?, ctl::parse_key(&end, hex)?);
                    ctl::region_scan(&client, &start, &end, limit).await?
                }
                None => {
                    let key = r
                        .key
                        .ok_or_else(|| anyhow::anyhow!("pass a KEY, `id N` or `scan START`"))?;
                    ctl::region_by_key(&client, &ctl::parse_key(&key, r.hex)?).await?
                }
            },
            CtlCommand::Store(StoreArgs { id: Some(id), .. }) => ctl::store(&client, id).await?,
            CtlCommand::Store(_) => anyhow::bail!("pass a store id, `delete ID` or `limit`"),
            CtlCommand::Stores => ctl::stores(&client).await?,
            CtlCommand::Member => ctl::members(&client).await?,
            CtlCommand::Leader => ctl::leader(&client).await?,
            CtlCommand::Cluster => ctl::cluster(&client).await?,
            CtlCommand::Members
            | CtlCommand::TransferLeader { .. }
            | CtlCommand::Resign
            | CtlCommand::DeleteMember { .. } => anyhow::bail!("an admin API verb"),
            CtlCommand::Scheduler { .. } | CtlCommand::Operator { .. } => {
                anyhow::bail!("a scheduling verb")
            }
        };
        print(json, shown)
    })
}

fn cert_command(args: CertArgs) -> anyhow::Result<()> {
    let ca_cert = args.certs_dir.join("ca.pem");
    let leaf = cert::Validity::days(args.days.unwrap_or(cert::Validity::LEAF_DAYS));
    match args.command {
        CertCommand::CreateCa => {
            anyhow::ensure!(
                !args.ca_key.exists(),
                "{} exists: a CA is made once",
                args.ca_key.display()
            );
            let days = args.days.unwrap_or(cert::Validity::CA_DAYS);
            let ca = cert::create_ca_valid("Meridian CA", cert::Validity::days(days))?;
            let key_dir = args.ca_key.parent().unwrap_or(std::path::Path::new("."));
            let key_name = args
                .ca_key
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix("-key.pem"))
                .ok_or_else(|| anyhow::anyhow!("--ca-key must name a file ending in -key.pem"))?;
            // The key goes to --ca-key, the certificate to CERTS_DIR/ca.pem.
            cert::write_pair(
                key_dir,
                key_name,
                &cert::Pem {
                    cert: ca.cert.clone(),
                    key: ca.key,
                },
            )?;
            if key_dir.join(format!("{key_name}.pem")) != ca_cert {
                meridian::tls::write_file(&args.certs_dir, "ca.pem", ca.cert.as_bytes())?;
            }
            println!("{} and {}", ca_cert.display(), args.ca_key.display());
        }
        CertCommand::CreateNode {
            hosts,
            role: Some(role),
            name,
            store_id,
        } => {
            anyhow::ensure!(
                matches!(role, cert::Role::Store | cert::Role::Client),
                "--role makes a TiKV (`store`) or TiDB (`client`) certificate; a member's is \
                 made without --role, an admin's with create-client"
            );
            let name = name.unwrap_or_else(|| role.name().to_string());
            let ca = cert::read_pem(&ca_cert, &args.ca_key)?;
            let spec = cert::NodeRole {
                name: &name,
                hosts: &hosts,
                role,
                store: store_id,
            };
            cert::write_pair(
                &args.certs_dir,
                &name,
                &cert::create_node_for_role(&ca, &spec, leaf)?,
            )?;
            println!(
                "{}/{name}.pem with role {} for {}{}, serving and calling",
                args.certs_dir.display(),
                role.name(),
                hosts.join(", "),
                store_id.map_or(String::new(), |id| format!(", store {id}")),
            );
        }
        CertCommand::CreateNode { hosts, .. } => {
            let ca = cert::read_pem(&ca_cert, &args.ca_key)?;
            cert::write_pair(
                &args.certs_dir,
                "node",
                &cert::create_node_valid(&ca, &hosts, leaf)?,
            )?;
            println!(
                "{}/node.pem for {}",
                args.certs_dir.display(),
                hosts.join(", ")
            );
        }
        CertCommand::CreateClient { role, name } => {
            let ca = cert::read_pem(&ca_cert, &args.ca_key)?;
            cert::write_pair(
                &args.certs_dir,
                &name,
                &cert::create_client_valid(&ca, &name, &[role], leaf)?,
            )?;
            println!(
                "{}/{name}.pem with role {}",
                args.certs_dir.display(),
                role.name()
            );
        }
    }
    Ok(())
}
