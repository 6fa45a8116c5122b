//! `loadgen sim`: runs a scenario of the deterministic cluster simulator (`meridian-sim`),
//! which drives Meridian's scheduling core, prints a summary, writes the report as JSON and
//! draws its peers and leaders per store as SVG.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// A named scenario: lost-store, decommission, scale-out, zone-loss, rolling-restart, merge.
    #[arg(
        long,
        conflicts_with_all = ["scenario_file", "fuzz"],
        required_unless_present_any = ["scenario_file", "fuzz"]
    )]
    pub scenario: Option<String>,
    /// A scenario from a TOML file (stores per zone, regions, actions and their times).
    #[arg(long, conflicts_with = "fuzz")]
    pub scenario_file: Option<PathBuf>,
    /// Runs this many random mixed scenarios (stores lost and returned, decommissions,
    /// scale-outs, key-range deletes), with joint consensus on, seeds `--seed` onwards, and
    /// counts their safety violations.
    #[arg(long)]
    pub fuzz: Option<u64>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stores of a named scenario (default: the base case, 100 in three zones, 34/33/33) or of
    /// each fuzzed one (default 12, at least 9).
    #[arg(long)]
    pub stores: Option<u32>,
    /// Regions of a named scenario (default: the base case, 1,000,000 x 3 replicas of 96 MiB)
    /// or of each fuzzed one (default 1,200).
    #[arg(long)]
    pub regions: Option<u64>,
    /// Where to write the report (with --fuzz, the summary) as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Where to draw the run's peers and leaders per store over simulated time, as SVG.
    #[arg(long, conflicts_with = "fuzz")]
    pub plot: Option<PathBuf>,
}

/// Runs it. Returns the violations and stuck operators (at least 1 when the run did not
/// converge), which make the exit status non-zero.
pub fn run(args: &SimArgs) -> anyhow::Result<u64> {
    if let Some(seeds) = args.fuzz {
        return fuzz(args, seeds);
    }
    let (stores, regions) = (
        args.stores.unwrap_or(100),
        args.regions.unwrap_or(1_000_000),
    );
    let scenario = match (&args.scenario, &args.scenario_file) {
        (Some(name), _) => match meridian_sim::named(name, stores, regions) {
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
    if let Some(path) = &args.plot {
        crate::plot::check_writable(path)?;
    }
    let started = Instant::now();
    let mut report = meridian_sim::run(scenario, args.seed);
    report.wall_s = started.elapsed().as_secs_f64();
    println!(
        "{}: seed {}, {} stores, {} regions ({} at the end, {} merges): converged {} after {} s (floor {:.0} s); moves {} (min {}), leader transfers {}, operators {}; violations {}, stuck operators {}; {:.0} s simulated in {:.1} s",
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
        report.stuck_operators,
        report.simulated_s,
        report.wall_s,
    );
    for v in &report.violation_samples {
        println!("  violation {v}");
    }
    for v in &report.stuck_samples {
        println!("  stuck {v}");
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        let title = format!(
            "loadgen sim: {}, seed {}, {} stores, {} regions",
            report.scenario, report.seed, report.stores, report.regions
        );
        crate::plot::write_sim(&title, &report.series, path)?;
    }
    Ok((report.violations + report.stuck_operators).max(u64::from(!report.converged)))
}

/// `--fuzz`: `seeds` random mixed scenarios, one line for each that broke a rule or did not
/// heal or left an operator stuck, and the summary. Returns the violations and stuck operators,
/// which make the exit status non-zero; a run that did not heal is reported but is no failure,
/// as random events may outlast a run.
fn fuzz(args: &SimArgs, seeds: u64) -> anyhow::Result<u64> {
    let stores = args
        .stores
        .unwrap_or(12)
        .max(meridian_sim::fuzz::MIN_STORES);
    let regions = args.regions.unwrap_or(1_200);
    let started = Instant::now();
    let mut summary = meridian_sim::fuzz::Summary {
        stores,
        regions,
        ..Default::default()
    };
    for seed in args.seed..args.seed + seeds {
        let scenario = meridian_sim::fuzz::scenario(seed, stores, regions);
        let report = meridian_sim::run(scenario, seed);
        if report.violations > 0 || report.stuck_operators > 0 || !report.converged {
            println!(
                "seed {seed}: violations {}, stuck operators {}, converged {}{}",
                report.violations,
                report.stuck_operators,
                report.converged,
                report
                    .violation_samples
                    .first()
                    .or(report.stuck_samples.first())
                    .map_or_else(String::new, |v| format!(": {v}"))
            );
        }
        summary.add(seed, &report);
    }
    summary.wall_s = started.elapsed().as_secs_f64();
    println!(
        "fuzz: {} seeds from {}, {stores} stores, {regions} regions: violations {}, stuck operators {}, healed {} of {}, operators {}, merges {}; {:.1} s",
        summary.seeds,
        args.seed,
        summary.violations,
        summary.stuck_operators,
        summary.converged,
        summary.seeds,
        summary.operators,
        summary.merges,
        summary.wall_s,
    );
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&summary)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(summary.violations + summary.stuck_operators)
}
