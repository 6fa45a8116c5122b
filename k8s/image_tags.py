"""The images' names and tags agree everywhere they are written: the Cargo
versions of `meridian` and `meridian-operator` are the tags that k8s/manifests, the operator's
sample, scripts/images and docker/compose.yaml use; docker/Dockerfile's targets build and
start the binaries of those names, label them with those versions by default, and run them as
the uid the operator's pods ask for. `images_agree()` returns the disagreements, empty when
there are none (k8s/validate.py reports them)."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = "ghcr.io/meridian"


def cargo_version(manifest):
    with open(ROOT / manifest, "rb") as f:
        return tomllib.load(f)["package"]["version"]


def docs(path):
    with open(ROOT / path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def dockerfile_stages(text):
    """Stage name -> its lines, from `FROM ... AS name` to the next FROM."""
    stages, name = {}, None
    for line in text.replace("\\\n", " ").splitlines():
        m = re.match(r"\s*FROM\s+\S+(?:\s+AS\s+(\S+))?", line, re.I)
        if m:
            name = (m.group(1) or "").lower()
            stages[name] = []
        elif name is not None:
            stages[name].append(line.strip())
    return stages


def images_agree():
    errors = []
    version = cargo_version("Cargo.toml")
    operator_version = cargo_version("k8s/Cargo.toml")
    meridian_image = f"{REPOSITORY}/meridian:{version}"
    operator_image = f"{REPOSITORY}/meridian-operator:{operator_version}"

    def expect(what, got, want):
        if got != want:
            errors.append(f"{what}: {got!r}, but {want!r} is expected")

    sample = next(d for d in docs("k8s/manifests/sample-cluster.yaml") if d["kind"] == "MeridianCluster")
    expect("sample-cluster.yaml spec.image", sample["spec"]["image"], meridian_image)
    expect("sample-cluster.yaml spec.version", str(sample["spec"]["version"]), version)

    deployment = next(d for d in docs("k8s/manifests/operator.yaml") if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    expect("operator.yaml's container image", pod["containers"][0]["image"], operator_image)

    member_uid = re.search(
        r"pub const MEMBER_UID: i64 = (\d+);",
        (ROOT / "k8s/src/decide/resources/stateful_set.rs").read_text(),
    ).group(1)
    expect("operator.yaml runAsUser", str(pod["securityContext"]["runAsUser"]), member_uid)

    stages = dockerfile_stages((ROOT / "docker/Dockerfile").read_text())
    build = " ".join(stages.get("build", []))
    for binary, target, want_version in (
        ("meridian", "meridian", version),
        ("meridian-operator", "operator", operator_version),
    ):
        if target not in stages:
            errors.append(f"docker/Dockerfile has no target {target!r}")
            continue
        if f"--bin {binary}" not in build or f"-p {binary}" not in build:
            errors.append(f"docker/Dockerfile's build stage does not build `-p {binary} --bin {binary}`")
        lines = " ".join(stages[target])
        expect(f"docker/Dockerfile target {target}: ARG VERSION",
               (re.search(r"ARG VERSION=(\S+)", lines) or [None, None])[1], want_version)
        expect(f"docker/Dockerfile target {target}: image title",
               (re.search(r'org\.opencontainers\.image\.title="([^"]+)"', lines) or [None, None])[1], binary)
        expect(f"docker/Dockerfile target {target}: ENTRYPOINT",
               (re.search(r'ENTRYPOINT \["([^"]+)"', lines) or [None, None])[1], f"/usr/local/bin/{binary}")
        expect(f"docker/Dockerfile target {target}: USER",
               (re.search(r"USER (\S+)", lines) or [None, None])[1], f"{member_uid}:{member_uid}")

    images = (ROOT / "scripts/images").read_text()
    for line in ("meridian_image=ghcr.io/meridian/meridian:$version",
                 "operator_image=ghcr.io/meridian/meridian-operator:$operator_version"):
        if line not in images:
            errors.append(f"scripts/images does not tag `{line}`")

    compose = yaml.safe_load((ROOT / "docker/compose.yaml").read_text())
    default = re.match(r"\$\{MERIDIAN_IMAGE:-([^}]+)\}", compose["x-member"]["image"])
    expect("docker/compose.yaml's default member image", default and default.group(1), meridian_image)
    return errors


if __name__ == "__main__":
    problems = images_agree()
    for p in problems:
        print(p)
    print("image names and tags agree" if not problems else "image names and tags DISAGREE")
    raise SystemExit(1 if problems else 0)
