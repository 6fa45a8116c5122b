//! Asks a Meridian cluster for one timestamp and prints it:
//! `get_ts ENDPOINT[,ENDPOINT..] CA_FILE` (a local node's CA is `DATA_DIR/tls/ca.pem`; the
//! client certificate beside it is presented). `tests/outside_crate.rs` builds this file as
//! the `main.rs` of a crate outside the workspace, so it uses only the public API.

use meridian_client::{Client, ClientOptions, Trust};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(endpoints), Some(ca)) = (args.next(), args.next()) else {
        return Err("usage: get_ts ENDPOINT[,ENDPOINT..] CA_FILE".into());
    };
    let endpoints = endpoints.split(',').map(str::to_string).collect();
    let client = Client::connect(ClientOptions::new(endpoints, Trust::Ca(ca.into()))).await?;
    let ts = client.get_ts().await?;
    println!("{} {} {}", ts.as_u64(), ts.physical_ms(), ts.logical());
    Ok(())
}
