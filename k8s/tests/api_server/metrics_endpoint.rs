//! The operator's own HTTPS endpoint as `run` starts it: every dashboard metric served,
//! `/metrics` only for a token the API server authenticates and authorizes, the probes open,
//! plain HTTP only with the opt-out.

use super::*;

/// The `meridian_operator_*` metric names a dashboard's queries use.
fn queried(dashboard: &serde_json::Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let mut rest = target["expr"].as_str().unwrap();
            while let Some(at) = rest.find("meridian_operator_") {
                let tail = &rest[at..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                names.insert(tail[..end].to_string());
                rest = &tail[end..];
            }
        }
    }
    names
}

/// Sample names in Prometheus text format.
fn exposed(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// The Prometheus scraper's service account, which the mock API server lets read `/metrics`,
/// and its token; a user it authenticates but does not let in, and a token it rejects.
const SCRAPER: &str = "system:serviceaccount:meridian-system:meridian-operator-metrics-scraper";
const SCRAPER_TOKEN: &str = "scraper-token";
const NOSY: &str = "system:serviceaccount:ops:nosy";
const NOSY_TOKEN: &str = "nosy-token";
const FORGED_TOKEN: &str = "forged-token";

/// The operator's endpoint as `run` serves it by default: HTTPS, here with a certificate for
/// loopback from a fresh CA (as `--metrics-cert/--metrics-key` from a mounted Secret), and
/// `/metrics` reviewed by a mock API server that knows the scraper and the nosy user.
struct Https {
    addr: std::net::SocketAddr,
    /// The CA a client verifies the endpoint with.
    ca: String,
    serving: tokio::task::JoinHandle<std::io::Result<()>>,
    /// The mock API server; it ends, returning what it was asked, once the endpoint is gone.
    api: tokio::task::JoinHandle<Vec<Seen>>,
    _dir: tempfile::TempDir,
}

async fn serve_https(telemetry: Endpoint) -> Https {
    let table = Table {
        tokens: BTreeMap::from([
            (SCRAPER_TOKEN.to_string(), SCRAPER.to_string()),
            (NOSY_TOKEN.to_string(), NOSY.to_string()),
        ]),
        metrics_readers: BTreeSet::from([SCRAPER.to_string()]),
        ..Table::default()
    };
    serve_https_on(telemetry, table).await
}

/// `serve_https` with the mock API server answering from `table`.
async fn serve_https_on(telemetry: Endpoint, table: Table) -> Https {
    let dir = tempfile::tempdir().unwrap();
    let ca = meridian::tls::cert::create_ca("metrics CA").unwrap();
    let pair =
        meridian::tls::cert::create_node(&ca, &["127.0.0.1".into(), "localhost".into()]).unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &pair.cert).unwrap();
    std::fs::write(&key, &pair.key).unwrap();
    let tls = ServingTls::load(&ServingCert::Files { cert, key }).unwrap();
    let (client, api) = mock_api(table);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let transport = Transport::Https {
        tls,
        access: Arc::new(MetricsAccess::new(client)),
    };
    let serving = tokio::spawn(endpoint::serve(listener, telemetry, transport));
    Https {
        addr,
        ca: ca.cert,
        serving,
        api,
        _dir: dir,
    }
}

/// What a GET got back.
#[derive(Debug)]
struct Got {
    status: u16,
    body: String,
    www_authenticate: Option<String>,
}

/// A GET over HTTPS verifying the endpoint against `ca`, with `token` as the bearer token.
/// Each call has its own client, so no connection outlives it.
async fn get_https(addr: std::net::SocketAddr, ca: &str, path: &str, token: Option<&str>) -> Got {
    let (ca, url, token) = (
        ca.to_string(),
        format!("https://127.0.0.1:{}{path}", addr.port()),
        token.map(str::to_string),
    );
    tokio::task::spawn_blocking(move || {
        let roots: Vec<_> = ureq::tls::parse_pem(ca.as_bytes())
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        let tls = TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .root_certs(RootCerts::Specific(Arc::new(roots)))
            .build();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .tls_config(tls)
            .build()
            .into();
        let mut request = agent.get(&url);
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let mut response = request.call().unwrap();
        Got {
            status: response.status().as_u16(),
            www_authenticate: response
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            body: response.body_mut().read_to_string().unwrap(),
        }
    })
    .await
    .unwrap()
}

/// A plain-HTTP GET: status and body, or why there was no HTTP answer.
async fn get_plain(
    addr: std::net::SocketAddr,
    path: &'static str,
) -> anyhow::Result<(u16, String)> {
    tokio::task::spawn_blocking(move || {
        meridian::admin::AdminClient::plain(&format!("http://{addr}")).get(path)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_operator_dashboard_queries_is_served_and_the_probes_answer() {
    // A reconcile through the controller's entry point, of a new cluster (its objects are
    // applied: a step), so that the per-cluster and per-step series exist as they do in a
    // running operator.
    let mc = cluster();
    let (client, server) = mock_api(Table::for_cluster(&mc));
    let ctx = context(client);
    controller::reconcile(Arc::new(mc.clone()), ctx.clone())
        .await
        .unwrap();
    let telemetry = Endpoint {
        metrics: ctx.metrics.clone(),
        probes: ctx.probes.clone(),
    };
    drop(ctx);
    server.await.unwrap();
    let https = serve_https(telemetry.clone()).await;
    let (addr, ca) = (https.addr, https.ca.clone());
    let get = |path: &'static str| {
        let ca = ca.clone();
        async move {
            let got = get_https(addr, &ca, path, Some(SCRAPER_TOKEN)).await;
            (got.status, got.body)
        }
    };

    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/meridian-operator.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let wanted = queried(&dashboard);
    assert!(wanted.len() >= 8, "{wanted:?}");
    let (status, text) = get("/metrics").await;
    assert_eq!(status, 200);
    let have = exposed(&text);
    let missing: Vec<&String> = wanted.iter().filter(|n| !have.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "missing from /metrics: {missing:?}\n{text}"
    );
    for series in [
        "meridian_operator_reconciles_total",
        "meridian_operator_upgrade_members{cluster=\"db/pd\"}",
        "meridian_operator_leader_moves_total{cluster=\"db/pd\",reason=\"upgrade\"}",
        "meridian_operator_failovers_total{cluster=\"db/pd\",step=\"replaced\"}",
    ] {
        assert!(sample(&text, series).is_some(), "{series}\n{text}");
    }
    assert_eq!(
        sample(&text, "meridian_operator_reconciles_total"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "meridian_operator_steps_total{action=\"Reconcile\",reason=\"Applied\"}"
        ),
        Some(1.0)
    );

    // Liveness answers from the start; readiness once the API server answered and, on the
    // replica that leads, once MeridianClusters were listed.
    assert_eq!(get("/healthz").await.0, 200);
    let (status, why) = get("/readyz").await;
    assert_eq!(status, 503, "{why}");
    telemetry.probes.api_reached(true);
    assert_eq!(get("/readyz").await.0, 200, "a follower standing by");
    telemetry.probes.leading();
    let (status, why) = get("/readyz").await;
    assert_eq!(status, 503);
    assert!(why.contains("first list"), "{why}");
    let mut table = Table::default();
    table.gets.insert(
        "/apis/meridian.io/v1alpha1/meridianclusters".into(),
        list("MeridianClusterList", vec![]),
    );
    let (client, server) = mock_api(table);
    controller::first_list(client, &telemetry.probes).await;
    let seen = server.await.unwrap();
    assert_eq!(
        seen.iter().map(Seen::line).collect::<Vec<_>>(),
        ["GET /apis/meridian.io/v1alpha1/meridianclusters?&limit=1"]
    );
    assert_eq!(get("/readyz").await.0, 200);
    https.serving.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_a_token_the_api_server_authenticates_and_authorizes_the_probes_do_not() {
    let telemetry = Endpoint::default();
    let https = serve_https(telemetry.clone()).await;
    let (addr, ca) = (https.addr, https.ca.as_str());

    // No token: 401 with the challenge, and no API call.
    let got = get_https(addr, ca, "/metrics", None).await;
    assert_eq!(got.status, 401, "{got:?}");
    assert_eq!(got.www_authenticate.as_deref(), Some("Bearer"));
    assert!(!got.body.contains("meridian_operator"), "{got:?}");
    // A token the API server does not authenticate: 401, and its reason is not echoed.
    let got = get_https(addr, ca, "/metrics", Some(FORGED_TOKEN)).await;
    assert_eq!(got.status, 401, "{got:?}");
    assert!(!got.body.contains("invalid bearer token"), "{got:?}");
    // Authenticated, but no binding lets it get /metrics: 403 naming the user.
    let got = get_https(addr, ca, "/metrics", Some(NOSY_TOKEN)).await;
    assert_eq!(got.status, 403, "{got:?}");
    assert!(got.body.contains(NOSY), "{got:?}");
    // The scraper: 200 with the registry, twice.
    for _ in 0..2 {
        let got = get_https(addr, ca, "/metrics", Some(SCRAPER_TOKEN)).await;
        assert_eq!(got.status, 200, "{got:?}");
        assert!(
            got.body.contains("meridian_operator_reconciles_total"),
            "{got:?}"
        );
    }
    // Within their 5 s, refusals are remembered too.
    assert_eq!(
        get_https(addr, ca, "/metrics", Some(NOSY_TOKEN))
            .await
            .status,
        403
    );
    assert_eq!(
        get_https(addr, ca, "/metrics", Some(FORGED_TOKEN))
            .await
            .status,
        401
    );

    // The probes need no token (the kubelet sends none), and a token changes nothing.
    let got = get_https(addr, ca, "/healthz", None).await;
    assert_eq!((got.status, got.body.as_str()), (200, "ok\n"));
    let got = get_https(addr, ca, "/readyz", None).await;
    assert_eq!(got.status, 503, "{got:?}");
    assert!(got.body.contains("not answered"), "{got:?}");
    telemetry.probes.api_reached(true);
    assert_eq!(get_https(addr, ca, "/readyz", None).await.status, 200);
    assert_eq!(
        get_https(addr, ca, "/readyz", Some(FORGED_TOKEN))
            .await
            .status,
        200
    );

    // Plain HTTP gets no HTTP answer from the HTTPS port.
    let plain = get_plain(addr, "/metrics").await;
    assert!(plain.is_err(), "{plain:?}");
    let plain = get_plain(addr, "/healthz").await;
    assert!(plain.is_err(), "{plain:?}");

    // What the API server was asked: one TokenReview per distinct token (the repeats were
    // answered from the cache), carrying the token; one SubjectAccessReview per authenticated
    // user, for get on the non-resource URL /metrics, with the user's groups.
    https.serving.abort();
    let seen = tokio::time::timeout(Duration::from_secs(10), https.api)
        .await
        .expect("the endpoint let go of its API client")
        .unwrap();
    let lines: Vec<String> = seen.iter().map(Seen::line).collect();
    assert_eq!(
        lines,
        [
            format!("POST {TOKEN_REVIEWS}?"),
            format!("POST {TOKEN_REVIEWS}?"),
            format!("POST {ACCESS_REVIEWS}?"),
            format!("POST {TOKEN_REVIEWS}?"),
            format!("POST {ACCESS_REVIEWS}?"),
        ]
    );
    let tokens: Vec<&serde_json::Value> = seen
        .iter()
        .filter(|s| s.uri.starts_with(TOKEN_REVIEWS))
        .map(|s| &s.body["spec"]["token"])
        .collect();
    assert_eq!(tokens, [FORGED_TOKEN, NOSY_TOKEN, SCRAPER_TOKEN]);
    let asked = &seen[4].body["spec"];
    assert_eq!(asked["user"], SCRAPER);
    assert_eq!(asked["uid"], format!("uid-{SCRAPER}"));
    assert_eq!(asked["groups"][0], "system:serviceaccounts");
    assert_eq!(
        asked["nonResourceAttributes"],
        serde_json::json!({"path": "/metrics", "verb": "get"})
    );
    assert_eq!(seen[2].body["spec"]["user"], NOSY);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_the_api_server_fails_is_a_503_and_is_asked_again_next_time() {
    let mut table = Table::default();
    table.write_replies.insert(
        TOKEN_REVIEWS.into(),
        (500, status_json(500, "InternalError")),
    );
    let https = serve_https_on(Endpoint::default(), table).await;
    for _ in 0..2 {
        let got = get_https(https.addr, &https.ca, "/metrics", Some(SCRAPER_TOKEN)).await;
        assert_eq!(got.status, 503, "{got:?}");
        assert!(!got.body.contains("meridian_operator"), "{got:?}");
    }
    https.serving.abort();
    let seen = tokio::time::timeout(Duration::from_secs(10), https.api)
        .await
        .expect("the endpoint let go of its API client")
        .unwrap();
    assert_eq!(
        seen.len(),
        2,
        "an outage is not a decision to remember: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_and_open_metrics_only_with_the_insecure_opt_out() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let telemetry = Endpoint::default();
    let serving = tokio::spawn(endpoint::serve(
        listener,
        telemetry,
        Transport::InsecurePlainHttp,
    ));
    let (status, text) = get_plain(addr, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    assert!(
        text.contains("meridian_operator_reconciles_total"),
        "{text}"
    );
    assert_eq!(get_plain(addr, "/healthz").await.unwrap().0, 200);
    serving.abort();
}
