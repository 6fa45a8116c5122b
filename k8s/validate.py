"""Validates the manifests: built-in kinds with kubernetes-validate --strict, and the sample
MeridianCluster against the CRD's own openAPIV3Schema (unknown fields are errors, as with
kubectl's strict field validation). Exit status 1 on any failure."""
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml

HERE = Path(__file__).parent / "manifests"
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
    print("manifests valid" if ok else "manifests INVALID")
    sys.exit(0 if ok else 1)


main()
