//! `loadgen sim`: runs a scenario of the deterministic cluster simulator (`meridian-sim`),
//! which drives Meridian's scheduling core, prints a summary and writes the report as JSON.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// A named scenario: lost-store, decommission, scale-out, zone-loss, rolling-restart, merge.
    #[arg(
        long,
        conflicts_with = "scenario_file",
        required_unless_present = "scenario_file"
    )]
    pub scenario: Option<String>,
    /// A scenario from a TOML file (stores per zone, regions, actions and their times).
    #[arg(long)]
    pub scenario_file: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stores of a named scenario (the base case: 100 in three zones, 34/33/33).
    #[arg(long, default_value_t = 100)]
    pub stores: u32,
    /// Regions of a named scenario (the base case: 1,000,000 x 3 replicas of 96 MiB).
    #[arg(long, default_value_t = 1_000_000)]
    pub regions: u64,
    /// Where to write the report as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs it. Returns the violations (at least 1 when the run did not converge), which make the
/// exit status non-zero.
pub fn run(args: &SimArgs) -> anyhow::Result<u64> {
    let scenario = match (&args.scenario, &args.scenario_file) {
        (Some(name), _) => match meridian_sim::named(name, args.stores, args.regions) {
            Some(s) => s,
            None => bail!(
                "no scenario {name:?}; the named ones are {}",
                meridian_sim::NAMES.join(", ")
            ),
        },
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            meridian_sim::Scenario::from_toml(&text)?
        }
        (None, None) => bail!("--scenario or --scenario-file"),
    };
    let started = Instant::now();
    let mut report = meridian_sim::run(scenario, args.seed);
    report.wall_s = started.elapsed().as_secs_f64();
    println!(
        "{}: seed {}, {} stores, {} regions ({} at the end, {} merges): converged {} after {} s (floor {:.0} s); moves {} (min {}), leader transfers {}, operators {}; violations {}; {:.0} s simulated in {:.1} s",
        report.scenario,
        report.seed,
        report.stores,
        report.regions,
        report.regions_at_end,
        report.merges,
        report.converged,
        report
            .converged_after_s
            .map_or_else(|| "-".to_string(), |s| format!("{s:.0}")),
        report.floor_s,
        report.moves,
        report.min_moves,
        report.leader_transfers,
        report.operators,
        report.violations,
        report.simulated_s,
        report.wall_s,
    );
    for v in &report.violation_samples {
        println!("  violation {v}");
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(report.violations.max(u64::from(!report.converged)))
}
