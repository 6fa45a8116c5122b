//! A simulator run (`loadgen sim --plot`) drawn from its report's per-store series: peers and
//! leaders per store over simulated time, one line per store, coloured by zone (balance is
//! judged within a zone, so a store's line reads against its zone's others). Owns that figure
//! only; the panels' house style and the key come from the parent module.

use std::path::Path;

use anyhow::Context;
use plotters::backend::SVGBackend;
use plotters::prelude::*;

use super::{draw_key, linear_chart, Area, Sample, FONT, KEY_WIDTH, WIDTH};

/// The zones' colours in a simulator plot, zone 0 first (`#1F77B4`, `#FF7F0E`, `#2CA02C`, ...);
/// a zone past the last takes the colours again.
pub const ZONES: [RGBColor; 6] = [
    RGBColor(0x1F, 0x77, 0xB4),
    RGBColor(0xFF, 0x7F, 0x0E),
    RGBColor(0x2C, 0xA0, 0x2C),
    RGBColor(0xD6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xBD),
    RGBColor(0x8C, 0x56, 0x4B),
];

/// The colour of zone `z`'s stores.
pub fn zone_colour(z: u32) -> RGBColor {
    ZONES[z as usize % ZONES.len()]
}

/// A simulator run's SVG size in pixels.
pub const SIM_HEIGHT: u32 = 820;

/// A simulator run as an SVG document: peers per store, then leaders per store, against
/// simulated time, one line per store in its zone's colour.
pub fn sim_svg(title: &str, series: &meridian_sim::Series) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, SIM_HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, (FONT, 26))?;
        let (peers, leaders) = root.split_vertically((SIM_HEIGHT - 40) / 2);
        store_panel(&peers, series, &series.peers, "Peers per store", "peers")?;
        store_panel(
            &leaders,
            series,
            &series.leaders,
            "Leaders per store",
            "leaders",
        )?;
        root.present()?;
    }
    Ok(out)
}

/// Writes `sim_svg` to `path`.
pub fn write_sim(title: &str, series: &meridian_sim::Series, path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, sim_svg(title, series)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// One panel of a simulator plot: `values[t][i]` is store i's count at sample t.
fn store_panel(
    area: &Area,
    series: &meridian_sim::Series,
    values: &[Vec<u64>],
    caption: &str,
    unit: &str,
) -> anyhow::Result<()> {
    let (area, key_area) = area.split_horizontally(WIDTH - KEY_WIDTH);
    let minutes = |s: u64| s as f64 / 60.0;
    let end = series.at_s.last().map_or(1.0, |&s| minutes(s).max(1.0));
    let top = values.iter().flatten().copied().max().unwrap_or(0).max(1) as f64 * 1.1;
    let mut chart = linear_chart(
        &area,
        caption,
        (0f64..end, 0f64..top),
        ("simulated time (min)", unit),
    )?;
    let stores = values.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..stores {
        // A store added during the run has no value before its first sample.
        let points: Vec<(f64, f64)> = series
            .at_s
            .iter()
            .zip(values)
            .filter_map(|(&at, row)| Some((minutes(at), *row.get(i)? as f64)))
            .collect();
        let zone = series.zones.get(i).copied().unwrap_or(0);
        chart.draw_series(LineSeries::new(points, zone_colour(zone).stroke_width(1)))?;
    }
    let zones = series.zones.iter().copied().max().map_or(0, |z| z + 1);
    let key: Vec<(Sample, String)> = (0..zones)
        .map(|z| {
            let n = series.zones.iter().filter(|&&x| x == z).count();
            (
                Sample::Line(zone_colour(z)),
                format!("zone {}: {n} stores", z + 1),
            )
        })
        .collect();
    draw_key(&key_area, &key)
}
