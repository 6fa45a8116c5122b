//! `meridian-operator crd` prints the CustomResourceDefinition the types generate (the file
//! committed as `k8s/manifests/crd.yaml`).

fn main() -> anyhow::Result<()> {
    match std::env::args().nth(1).as_deref() {
        Some("crd") => {
            println!("{}", meridian_operator::crd::crd_manifest()?);
            Ok(())
        }
        _ => anyhow::bail!("usage: meridian-operator crd"),
    }
}
