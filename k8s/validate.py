"""Validates the manifests: built-in kinds with kubernetes-validate --strict, the sample
MeridianCluster against the CRD's own openAPIV3Schema (unknown fields are errors, as with
kubectl's strict field validation), and the objects the operator makes for the sample
(`meridian-operator render`: Services, NetworkPolicy, StatefulSet, ...) with
kubernetes-validate --strict too; and that operator.yaml fits what the operator makes: its pods
carry the labels, and run in the namespace, that the admin NetworkPolicy lets in, and it mounts
its admin certificate Secret where the operator reads it; its probes and metrics port match
what the operator serves (--metrics-addr, /healthz, /readyz), and
dashboards/operator-podmonitor.yaml scrapes that port on those pods. Exit status 1 on any
failure."""
import os
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
import yaml

HERE = Path(__file__).parent / "manifests"
MONITORING = Path(__file__).parent.parent / "dashboards" / "podmonitor.yaml"
OPERATOR_MONITORING = Path(__file__).parent.parent / "dashboards" / "operator-podmonitor.yaml"
# Where `meridian-operator run` serves /metrics, /healthz and /readyz without --metrics-addr.
METRICS_PORT = 8080
BUILT_IN = ["crd.yaml", "rbac.yaml", "operator.yaml", "sample-etcd.yaml"]


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


def metrics_port(args):
    """The port of `run`'s --metrics-addr (either spelling), or the default."""
    for i, arg in enumerate(args):
        if arg == "--metrics-addr" and i + 1 < len(args):
            return int(args[i + 1].rsplit(":", 1)[1])
        if arg.startswith("--metrics-addr="):
            return int(arg.rsplit(":", 1)[1])
    return METRICS_PORT


def operator_observable(deployment):
    """Errors where operator.yaml's probes and metrics port, or operator-podmonitor.yaml, miss
    what the operator serves."""
    errors = []
    template = deployment["spec"]["template"]
    container = template["spec"]["containers"][0]
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    served = metrics_port(container.get("args", []))
    if ports.get("metrics") != served:
        errors.append(
            f"operator.yaml: no container port named metrics at {served} (--metrics-addr)"
        )
    for probe, path in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")]:
        get = container.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("port") not in ("metrics", served):
            errors.append(f"operator.yaml: {probe} must GET {path} on the metrics port")
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
        if ep.get("port") not in ports:
            errors.append(f"operator-podmonitor.yaml: the operator has no port {ep.get('port')}")
        if ep.get("path", "/metrics") != "/metrics":
            errors.append("operator-podmonitor.yaml: the operator serves /metrics")
        if ep.get("scheme", "http") != "http":
            errors.append("operator-podmonitor.yaml: the operator's endpoint is plain HTTP")
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
        errors = (
            operator_fits(deployment, policy)
            + operator_observable(deployment)
            + monitoring_fits(sample, files, Path(tmp))
        )
        for err in errors:
            print(err)
            ok = False
    print("manifests valid" if ok else "manifests INVALID")
    sys.exit(0 if ok else 1)


main()
