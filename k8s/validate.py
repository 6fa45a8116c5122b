"""Validates the manifests: built-in kinds with kubernetes-validate --strict, the sample
MeridianCluster against the CRD's own openAPIV3Schema (unknown fields are errors, as with
kubectl's strict field validation), and the objects the operator makes for the sample
(`meridian-operator render`: Services, NetworkPolicy, StatefulSet, ...) with
kubernetes-validate --strict too; and that operator.yaml fits what the operator makes: its pods
carry the labels, and run in the namespace, that the admin NetworkPolicy lets in, and it mounts
its admin certificate Secret where the operator reads it; its probes and metrics port match
what the operator serves (--metrics-addr, /healthz, /readyz over HTTPS, never
--metrics-insecure), its serving certificate comes from a mounted Secret, and its ClusterRole
may create the TokenReviews and SubjectAccessReviews that guard /metrics; and
dashboards/operator-podmonitor.yaml scrapes that port on those pods over HTTPS, verifying the
certificate with that Secret's ca.crt, with the token of a service account bound to the
ClusterRole that may get /metrics (its built-in objects checked with kubernetes-validate
--strict; the PodMonitor, a CRD type the schemas lack, field by field against
prometheus-operator's); and that the image names and tags agree with the Cargo versions, the
Dockerfile and scripts/images (image_tags.py). Exit status 1 on any failure."""
import os
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
import yaml

from image_tags import images_agree

HERE = Path(__file__).parent / "manifests"
MONITORING = Path(__file__).parent.parent / "dashboards" / "podmonitor.yaml"
OPERATOR_MONITORING = Path(__file__).parent.parent / "dashboards" / "operator-podmonitor.yaml"
# Where `meridian-operator run` serves /metrics, /healthz and /readyz without --metrics-addr.
METRICS_PORT = 8080
BUILT_IN = ["crd.yaml", "rbac.yaml", "operator.yaml", "sample-etcd.yaml"]
# The ClusterRole a scraper of the operator's /metrics is bound to (rbac.yaml).
METRICS_READER = "meridian-operator-metrics-reader"
# prometheus-operator's PodMonitor (monitoring.coreos.com/v1) fields this repository may use:
# kubernetes-validate has no schema for a CRD type, so a misspelt field would pass unnoticed.
POD_METRICS_ENDPOINT_FIELDS = {
    "authorization", "basicAuth", "bearerTokenSecret", "enableHttp2", "filterRunning",
    "followRedirects", "honorLabels", "honorTimestamps", "interval", "metricRelabelings",
    "noProxy", "oauth2", "params", "path", "port", "portNumber", "proxyConnectHeader",
    "proxyFromEnvironment", "proxyUrl", "relabelings", "scheme", "scrapeTimeout", "targetPort",
    "tlsConfig", "trackTimestampsStaleness",
}
TLS_CONFIG_FIELDS = {
    "ca", "cert", "insecureSkipVerify", "keySecret", "maxVersion", "minVersion", "serverName",
}


def strict(schema, value, path="spec"):
    """Every field of `value` must be declared in `schema`."""
    errors = []
    if isinstance(value, dict) and "properties" in schema:
        for key, v in value.items():
            if key not in schema["properties"]:
                errors.append(f"{path}.{key}: unknown field")
            else:
                errors += strict(schema["properties"][key], v, f"{path}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            errors += strict(schema["items"], v, f"{path}[{i}]")
    return errors


def operator_deployment():
    docs = yaml.safe_load_all((HERE / "operator.yaml").read_text())
    return next(d for d in docs if d and d["kind"] == "Deployment")


def operator_fits(deployment, policy):
    """Errors where operator.yaml's Deployment and the rendered admin NetworkPolicy disagree."""
    errors = []
    admitted = [
        peer
        for rule in policy["spec"]["ingress"]
        for peer in rule.get("from", [])
        if "namespaceSelector" in peer
    ]
    if len(admitted) != 1:
        return [f"NetworkPolicy: expected one operator peer, got {admitted}"]
    peer = admitted[0]
    template = deployment["spec"]["template"]
    labels = template["metadata"]["labels"]
    for k, v in peer["podSelector"]["matchLabels"].items():
        if labels.get(k) != v:
            errors.append(f"operator.yaml: pods lack {k}={v}, which the admin port lets in")
    namespace = peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
    if namespace != deployment["metadata"]["namespace"]:
        errors.append(f"operator.yaml: not in {namespace}, which the admin port lets in")
    container = template["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    tls_dir = env.get("MERIDIAN_ADMIN_TLS_DIR", "/etc/meridian-admin-tls")
    mounts = [m for m in container.get("volumeMounts", []) if m["mountPath"] == tls_dir]
    volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
    if not mounts or "secret" not in volumes.get(mounts[0]["name"], {}):
        errors.append(f"operator.yaml: no Secret mounted at {tls_dir}")
    elif "subPath" in mounts[0]:
        errors.append("operator.yaml: a subPath mount never sees a renewed Secret")
    return errors


def flag(args, name):
    """The value of `run`'s flag `name` (either spelling), or None."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def metrics_port(args):
    """The port of `run`'s --metrics-addr, or the default."""
    addr = flag(args, "--metrics-addr")
    return int(addr.rsplit(":", 1)[1]) if addr else METRICS_PORT


def mounted_secret(template, container, path):
    """The Secret whose directory mount (no subPath, so a renewal reaches it) holds `path`."""
    volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
    for m in container.get("volumeMounts", []):
        if "subPath" not in m and path.startswith(m["mountPath"].rstrip("/") + "/"):
            return volumes.get(m["name"], {}).get("secret", {}).get("secretName")
    return None


def rules_allow(rules, group, resource, verb):
    return any(
        group in r.get("apiGroups", [])
        and resource in r.get("resources", [])
        and verb in r.get("verbs", [])
        for r in rules
    )


def bound_cluster_roles(docs, namespace, account):
    """The ClusterRoles that ClusterRoleBindings in `docs` bind the service account to."""
    return {
        d["roleRef"]["name"]
        for d in docs
        if d["kind"] == "ClusterRoleBinding" and d["roleRef"]["kind"] == "ClusterRole"
        for s in d.get("subjects", [])
        if s["kind"] == "ServiceAccount"
        and s["name"] == account
        and s.get("namespace") == namespace
    }


def metrics_access_rbac(deployment, rbac):
    """Errors where rbac.yaml does not let the operator review tokens for /metrics, or lacks
    the ClusterRole a scraper is bound to."""
    errors = []
    namespace = deployment["metadata"]["namespace"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    roles = {d["metadata"]["name"]: d for d in rbac if d["kind"] == "ClusterRole"}
    rules = [
        r
        for name in bound_cluster_roles(rbac, namespace, account)
        for r in roles.get(name, {}).get("rules", [])
    ]
    for group, resource in [
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    ]:
        if not rules_allow(rules, group, resource, "create"):
            errors.append(f"rbac.yaml: the operator may not create {resource} ({group})")
    reader = roles.get(METRICS_READER, {}).get("rules", [])
    if not any(
        "/metrics" in r.get("nonResourceURLs", []) and "get" in r.get("verbs", [])
        for r in reader
    ):
        errors.append(f"rbac.yaml: no ClusterRole {METRICS_READER} that may get /metrics")
    return errors


def operator_observable(deployment, rbac, tmp):
    """Errors where operator.yaml's probes, metrics port and serving certificate, or
    operator-podmonitor.yaml, miss what the operator serves."""
    errors = []
    template = deployment["spec"]["template"]
    container = template["spec"]["containers"][0]
    args = container.get("args", [])
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    served = metrics_port(args)
    if ports.get("metrics") != served:
        errors.append(
            f"operator.yaml: no container port named metrics at {served} (--metrics-addr)"
        )
    if any(a.split("=", 1)[0] == "--metrics-insecure" for a in args):
        errors.append("operator.yaml: --metrics-insecure serves /metrics to anyone, over HTTP")
    for probe, path in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")]:
        get = container.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("port") not in ("metrics", served):
            errors.append(f"operator.yaml: {probe} must GET {path} on the metrics port")
        if get.get("scheme", "HTTP") != "HTTPS":
            errors.append(f"operator.yaml: {probe} must use scheme HTTPS (the port is HTTPS)")
    cert, key = flag(args, "--metrics-cert"), flag(args, "--metrics-key")
    serving_secret = cert and mounted_secret(template, container, cert)
    if not (cert and key):
        errors.append(
            "operator.yaml: no --metrics-cert/--metrics-key: a self-signed certificate no "
            "scraper can verify"
        )
    elif not serving_secret or mounted_secret(template, container, key) != serving_secret:
        errors.append(
            f"operator.yaml: {cert} and {key} are not in one Secret mounted without subPath"
        )
    errors += metrics_access_rbac(deployment, rbac)
    docs = [d for d in yaml.safe_load_all(OPERATOR_MONITORING.read_text()) if d]
    monitors = [d for d in docs if d["kind"] == "PodMonitor"]
    if len(monitors) != 1:
        return errors + [f"operator-podmonitor.yaml: expected one PodMonitor, got {len(monitors)}"]
    monitor = monitors[0]
    namespace = deployment["metadata"]["namespace"]
    selected = monitor["spec"].get("namespaceSelector", {}).get("matchNames", [])
    if monitor["metadata"].get("namespace") != namespace and namespace not in selected:
        errors.append(f"operator-podmonitor.yaml: does not select the namespace {namespace}")
    labels = template["metadata"]["labels"]
    for k, v in monitor["spec"]["selector"]["matchLabels"].items():
        if labels.get(k) != v:
            errors.append(f"operator-podmonitor.yaml: operator pods lack {k}={v}")
    for ep in monitor["spec"]["podMetricsEndpoints"]:
        errors += [
            f"operator-podmonitor.yaml: {field}: not a field of a PodMonitor endpoint"
            for field in sorted(set(ep) - POD_METRICS_ENDPOINT_FIELDS)
        ] + [
            f"operator-podmonitor.yaml: tlsConfig.{field}: not a field of a TLS config"
            for field in sorted(set(ep.get("tlsConfig", {})) - TLS_CONFIG_FIELDS)
        ]
        if ep.get("port") not in ports:
            errors.append(f"operator-podmonitor.yaml: the operator has no port {ep.get('port')}")
        if ep.get("path", "/metrics") != "/metrics":
            errors.append("operator-podmonitor.yaml: the operator serves /metrics")
        if ep.get("scheme", "http").lower() != "https":
            errors.append("operator-podmonitor.yaml: the operator's endpoint is HTTPS")
        errors += scraper_fits(ep, docs, rbac, namespace, serving_secret)
    built_in = [d for d in docs if d["kind"] != "PodMonitor"]
    f = tmp / "operator-monitoring.yaml"
    f.write_text(yaml.safe_dump_all(built_in))
    if subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet", str(f)]
    ).returncode != 0:
        errors.append("operator-podmonitor.yaml: its built-in objects are not valid")
    return errors


def scraper_fits(ep, docs, rbac, namespace, serving_secret):
    """Errors where a PodMonitor endpoint would not get past /metrics' reviews, or would send
    its token to a server it has not verified."""
    errors = []
    tls = ep.get("tlsConfig", {})
    if tls.get("insecureSkipVerify"):
        errors.append("operator-podmonitor.yaml: insecureSkipVerify sends the token unverified")
    ca = tls.get("ca", {}).get("secret", {})
    if ca != {"name": serving_secret, "key": "ca.crt"}:
        errors.append(
            f"operator-podmonitor.yaml: CA {ca} is not the ca.crt of the operator's serving "
            f"Secret {serving_secret}"
        )
    if not tls.get("serverName"):
        errors.append(
            "operator-podmonitor.yaml: no tlsConfig.serverName: pods are scraped by address, "
            "which the certificate does not name"
        )
    if "bearerTokenSecret" in ep:
        errors.append("operator-podmonitor.yaml: bearerTokenSecret is deprecated: authorization")
    auth = ep.get("authorization", {})
    if auth.get("type", "Bearer").lower() != "bearer":
        return errors + ["operator-podmonitor.yaml: /metrics takes a Bearer token"]
    credentials = auth.get("credentials", {})
    secrets = {
        d["metadata"]["name"]: d
        for d in docs
        if d["kind"] == "Secret" and d["metadata"].get("namespace") == namespace
    }
    secret = secrets.get(credentials.get("name"))
    account = (secret or {}).get("metadata", {}).get("annotations", {}).get(
        "kubernetes.io/service-account.name"
    )
    if (
        secret is None
        or secret.get("type") != "kubernetes.io/service-account-token"
        or credentials.get("key") != "token"
    ):
        return errors + [
            "operator-podmonitor.yaml: authorization must send the token of a "
            f"service-account-token Secret in {namespace} made here, key token"
        ]
    accounts = {
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "ServiceAccount" and d["metadata"].get("namespace") == namespace
    }
    if account not in accounts:
        errors.append(f"operator-podmonitor.yaml: no ServiceAccount {account} in {namespace}")
    if METRICS_READER not in bound_cluster_roles(docs + rbac, namespace, account):
        errors.append(f"operator-podmonitor.yaml: {account} is not bound to {METRICS_READER}")
    return errors


def monitoring_fits(sample, files, tmp):
    """dashboards/podmonitor.yaml against the sample: the PodMonitor scrapes a port the
    members have, over HTTPS, verifying with the cluster's TLS Secret; its NetworkPolicy is a
    valid built-in object for the admin port. Returns the errors."""
    errors = []
    docs = [d for d in yaml.safe_load_all(MONITORING.read_text()) if d]
    monitor = next(d for d in docs if d["kind"] == "PodMonitor")
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    sts = next(json.loads(f.read_text()) for f in files if f.name.startswith("StatefulSet"))
    ports = {
        p["name"]: p["containerPort"]
        for c in sts["spec"]["template"]["spec"]["containers"]
        for p in c.get("ports", [])
    }
    for ep in monitor["spec"]["podMetricsEndpoints"]:
        if ep["port"] not in ports:
            errors.append(f"podmonitor.yaml: members have no port named {ep['port']}")
        if ep.get("scheme") != "https":
            errors.append("podmonitor.yaml: the admin port is HTTPS")
        ca = ep.get("tlsConfig", {}).get("ca", {}).get("secret", {})
        if ca != {"name": sample["spec"]["tlsSecret"], "key": "ca.crt"}:
            errors.append(f"podmonitor.yaml: CA {ca} is not the cluster's TLS Secret's ca.crt")
    for policy in policies:
        for rule in policy["spec"]["ingress"]:
            for port in rule.get("ports", []):
                if port["port"] != ports.get("admin"):
                    errors.append(f"podmonitor.yaml: NetworkPolicy opens {port['port']}")
    f = tmp / "monitoring-policies.yaml"
    f.write_text(yaml.safe_dump_all(policies))
    if subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet", str(f)]
    ).returncode != 0:
        errors.append("podmonitor.yaml: the NetworkPolicy is not valid")
    return errors


def rendered(sample, tmp, operator_namespace):
    """The operator's objects for `sample`, each in its own file in `tmp`."""
    cluster = dict(sample)
    # A stored object has a uid: with one, the owner references are rendered and checked too.
    cluster["metadata"] = dict(sample["metadata"], uid="00000000-0000-0000-0000-000000000001")
    run = subprocess.run(
        ["cargo", "run", "--quiet", "-p", "meridian-operator", "--", "render"],
        input=json.dumps(cluster), capture_output=True, text=True,
        cwd=Path(__file__).parent,
        env=dict(os.environ, POD_NAMESPACE=operator_namespace),
    )
    if run.returncode != 0:
        print(f"meridian-operator render failed:\n{run.stderr}")
        return None
    files = []
    for obj in json.loads(run.stdout):
        f = tmp / f"{obj['kind']}-{obj['metadata']['name']}.json"
        f.write_text(json.dumps(obj))
        files.append(f)
    return files


def main():
    ok = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet"]
        + [str(HERE / f) for f in BUILT_IN]
    ).returncode == 0
    crd = json.loads((HERE / "crd.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    sample = yaml.safe_load((HERE / "sample-cluster.yaml").read_text())
    try:
        jsonschema.validate(sample, schema)
    except jsonschema.ValidationError as e:
        print(f"sample-cluster.yaml: {e.message} at {list(e.path)}")
        ok = False
    for err in strict(schema["properties"]["spec"], sample["spec"]):
        print(f"sample-cluster.yaml: {err}")
        ok = False
    with tempfile.TemporaryDirectory(prefix="meridian-rendered-") as tmp:
        deployment = operator_deployment()
        files = rendered(sample, Path(tmp), deployment["metadata"]["namespace"])
        if files is None:
            print("manifests INVALID")
            sys.exit(1)
        kinds = sorted(f.name.split("-")[0] for f in files)
        print(f"rendered for the sample: {', '.join(kinds)}")
        ok &= subprocess.run(
            [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet"]
            + [str(f) for f in files]
        ).returncode == 0
        policy = next(
            json.loads(f.read_text()) for f in files if f.name.startswith("NetworkPolicy")
        )
        rbac = [d for d in yaml.safe_load_all((HERE / "rbac.yaml").read_text()) if d]
        errors = (
            operator_fits(deployment, policy)
            + operator_observable(deployment, rbac, Path(tmp))
            + monitoring_fits(sample, files, Path(tmp))
            + images_agree()
        )
        for err in errors:
            print(err)
            ok = False
    print("manifests valid" if ok else "manifests INVALID")
    sys.exit(0 if ok else 1)


main()
