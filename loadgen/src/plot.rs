//! `--plot FILE.svg`: draws a finished run. This module owns the drawing alone, and is pure: it
//! takes the run's per-second buckets (made here from the per-second histograms that
//! `latency.rs` keeps), its stalls (`stall.rs`), the failovers seen during it and its whole-run
//! latency histogram, and returns an SVG with two panels:
//!
//! - per second of the run: throughput, and the p50, p99 and p99.9 latency (log scale), with the
//!   stretches in which no request completed shaded and failovers marked;
//! - the latency percentile distribution of the whole run (HDR style: latency against the
//!   percentile, on a log scale of 1 / (1 - p), ticked at 50/90/99/99.9/99.99 %).
//!
//! A simulator run (`loadgen sim --plot`) is drawn by `sim`, in the same style.
//!
//! Plotters draws with its SVG backend only and no font feature: text goes into the SVG as
//! `<text>` elements naming a font family, and the viewer lays it out, so no system font or
//! bundled font is needed.

use std::path::Path;

use anyhow::Context;
use hdrhistogram::Histogram;
use plotters::backend::SVGBackend;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

mod sim;
pub use sim::{sim_svg, write_sim, zone_colour, SIM_HEIGHT, ZONES};

/// The SVG's size in pixels.
pub const WIDTH: u32 = 1000;
pub const HEIGHT: u32 = 1040;

/// The throughput series' colour (its SVG stroke is `#1F77B4`).
pub const THROUGHPUT: RGBColor = RGBColor(0x1F, 0x77, 0xB4);
/// p50, p99 and p99.9 (`#2CA02C`, `#FF7F0E`, `#D62728`).
pub const PERCENTILES: [(&str, RGBColor); 3] = [
    ("p50", RGBColor(0x2C, 0xA0, 0x2C)),
    ("p99", RGBColor(0xFF, 0x7F, 0x0E)),
    ("p99.9", RGBColor(0xD6, 0x27, 0x28)),
];
/// The percentile distribution's curve (`#9467BD`).
pub const DISTRIBUTION: RGBColor = RGBColor(0x94, 0x67, 0xBD);
const STALL: RGBColor = RGBColor(0xD6, 0x27, 0x28);
const FAILOVER: RGBColor = RGBColor(0x8C, 0x56, 0x4B);

/// A trailing bucket shorter than this joins the one before: a run's last few milliseconds
/// are no second of their own, and as a rate they would be noise.
const MERGE_BELOW_S: f64 = 0.25;

const FONT: &str = "sans-serif";

/// One bucket of the run, normally one second: `[from_s, to_s)` since the run's start.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    pub from_s: f64,
    pub to_s: f64,
    /// Operations completed in the bucket.
    pub ops: u64,
    /// Latency percentiles of those operations (0 when none completed).
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

impl Bucket {
    pub fn per_sec(&self) -> f64 {
        self.ops as f64 / (self.to_s - self.from_s).max(1e-3)
    }

    fn percentiles(&self) -> [f64; 3] {
        [self.p50_us, self.p99_us, self.p999_us]
    }
}

/// Buckets from the per-second histograms (of nanoseconds) of a run that lasted `duration_s`.
pub fn buckets(seconds: &[Histogram<u32>], duration_s: f64) -> Vec<Bucket> {
    let mut spans: Vec<(f64, f64, Histogram<u32>)> = Vec::new();
    for (i, h) in seconds.iter().enumerate() {
        let from = i as f64;
        let width = (duration_s - from).clamp(0.0, 1.0);
        if width < MERGE_BELOW_S {
            if let Some(last) = spans.last_mut() {
                last.1 = last.1.max(duration_s);
                let _ = last.2.add(h);
                continue;
            }
        }
        spans.push((from, from + width.max(1e-3), h.clone()));
    }
    spans
        .into_iter()
        .map(|(from_s, to_s, h)| {
            let at = |q: f64| {
                if h.is_empty() {
                    0.0
                } else {
                    h.value_at_quantile(q) as f64 / 1e3
                }
            };
            Bucket {
                from_s,
                to_s,
                ops: h.len(),
                p50_us: at(0.5),
                p99_us: at(0.99),
                p999_us: at(0.999),
            }
        })
        .collect()
}

/// Stretches of `[from, to)` nanoseconds (as `stall::common` gives them) in seconds.
pub fn stalls_s(stalls: &[(u64, u64)]) -> Vec<(f64, f64)> {
    stalls
        .iter()
        .map(|&(a, b)| (a as f64 / 1e9, b as f64 / 1e9))
        .collect()
}

/// Everything a plot shows.
pub struct Run<'a> {
    /// The figure's title: what ran, against what.
    pub title: String,
    /// What an operation is, plural: "timestamps", "heartbeats", "lookups".
    pub unit: &'a str,
    /// What a latency is, e.g. "latency" or "batch round trip".
    pub latency: &'a str,
    pub duration_s: f64,
    pub buckets: Vec<Bucket>,
    /// Stretches in which no request completed, in seconds since the start.
    pub stalls: Vec<(f64, f64)>,
    /// Failovers: when (seconds since the start) and a label such as "leader n1".
    pub failovers: Vec<(f64, String)>,
    /// The whole run's latencies, in nanoseconds.
    pub histogram: &'a Histogram<u64>,
}

/// The plot as an SVG document.
pub fn svg(run: &Run) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(&run.title, (FONT, 26))?;
        let (time, distribution) = root.split_vertically(630);
        let (throughput, latency) = time.split_vertically(300);
        throughput_panel(&throughput, run)?;
        latency_panel(&latency, run)?;
        distribution_panel(&distribution, run)?;
        root.present()?;
    }
    Ok(out)
}

/// Fails if `path` cannot be written (a missing directory, say): called before a run, so a
/// bad path does not cost the run.
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
        .with_context(|| format!("--plot {}", path.display()))
}

/// Writes `svg(run)` to `path`.
pub fn write(run: &Run, path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, svg(run)?).with_context(|| format!("writing {}", path.display()))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type Chart<'a, 'b, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, Y>>;

/// A linear chart over `x` and `y` in `area` with its caption, its mesh drawn in the house
/// style (axis descriptions, `si` labels on y, faint grid lines).
fn linear_chart<'a, 'b>(
    area: &'a Area<'b>,
    caption: &str,
    (x, y): (std::ops::Range<f64>, std::ops::Range<f64>),
    (x_desc, y_desc): (&str, &str),
) -> anyhow::Result<Chart<'a, 'b, RangedCoordf64>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 19))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .y_label_formatter(&|v| si(*v))
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .light_line_style(BLACK.mix(0.04))
        .draw()?;
    Ok(chart)
}

/// The time axis: the whole run, at least a second.
fn time_end(run: &Run) -> f64 {
    let last = run.buckets.last().map_or(0.0, |b| b.to_s);
    let end = run.duration_s.max(last);
    if end.is_finite() && end > 0.0 {
        end
    } else {
        1.0
    }
}

/// Points of a step line over `buckets`: each value held across its bucket.
fn steps<'a>(
    buckets: impl IntoIterator<Item = &'a Bucket>,
    value: impl Fn(&Bucket) -> f64,
) -> Vec<(f64, f64)> {
    buckets
        .into_iter()
        .flat_map(|b| [(b.from_s, value(b)), (b.to_s, value(b))])
        .collect()
}

/// What a key entry shows beside its text.
enum Sample {
    Line(RGBColor),
    Dashed(RGBColor),
    Fill(RGBAColor),
    /// Text alone (a figure).
    None,
}

/// Width of the strip right of each chart that holds its key.
const KEY_WIDTH: u32 = 200;

/// Draws a key into the strip `area`: a sample and a text per entry, top down.
fn draw_key(area: &Area, entries: &[(Sample, String)]) -> anyhow::Result<()> {
    let style = TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (sample, text)) in entries.iter().enumerate() {
        let y = 52 + 22 * i as i32;
        let (x0, x1) = (6, 30);
        match sample {
            Sample::Line(c) => {
                area.draw(&PathElement::new([(x0, y), (x1, y)], c.stroke_width(2)))?;
            }
            Sample::Dashed(c) => {
                for x in [x0, x0 + 10, x0 + 20] {
                    area.draw(&PathElement::new([(x, y), (x + 5, y)], c.stroke_width(2)))?;
                }
            }
            Sample::Fill(c) => {
                area.draw(&Rectangle::new([(x0, y - 6), (x1, y + 6)], c.filled()))?;
            }
            Sample::None => {}
        }
        area.draw(&Text::new(text.clone(), (x1 + 8, y), style.clone()))?;
    }
    Ok(())
}

/// Shades the stalls and marks the failovers between `y0` and `y1` of a time chart; returns
/// their key entries.
fn mark_events<Y>(
    chart: &mut Chart<'_, '_, Y>,
    run: &Run,
    y0: f64,
    y1: f64,
) -> anyhow::Result<Vec<(Sample, String)>>
where
    Y: Ranged<ValueType = f64>,
{
    let mut key = Vec::new();
    let shade = STALL.mix(0.18);
    if !run.stalls.is_empty() {
        let total_ms: f64 = run.stalls.iter().map(|(a, b)| (b - a) * 1e3).sum();
        chart.draw_series(
            run.stalls
                .iter()
                .map(|&(a, b)| Rectangle::new([(a, y0), (b.max(a + 1e-3), y1)], shade.filled())),
        )?;
        key.push((
            Sample::Fill(shade),
            format!("unavailable: {}", duration_us(total_ms * 1e3)),
        ));
    }
    for (at, label) in &run.failovers {
        chart.draw_series(DashedLineSeries::new(
            [(*at, y0), (*at, y1)],
            6,
            4,
            FAILOVER.stroke_width(2),
        ))?;
        chart.draw_series(std::iter::once(
            EmptyElement::at((*at, y1))
                + Text::new(
                    label.clone(),
                    (5, 4),
                    (FONT, 15).into_font().color(&FAILOVER),
                ),
        ))?;
    }
    if !run.failovers.is_empty() {
        key.push((Sample::Dashed(FAILOVER), "new leader seen".to_string()));
    }
    Ok(key)
}

fn throughput_panel(area: &Area, run: &Run) -> anyhow::Result<()> {
    let (area, key_area) = area.split_horizontally(WIDTH - KEY_WIDTH);
    let end = time_end(run);
    let top = run
        .buckets
        .iter()
        .map(Bucket::per_sec)
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.15;
    let ops: u64 = run.buckets.iter().map(|b| b.ops).sum();
    let mean = ops as f64 / run.duration_s.max(1e-9);
    let mut chart = linear_chart(
        &area,
        &format!("Throughput per second (mean {} {}/s)", si(mean), run.unit),
        (0f64..end, 0f64..top),
        ("time (s)", &format!("{}/s", run.unit)),
    )?;
    let mut key = vec![(Sample::Line(THROUGHPUT), format!("{}/s", run.unit))];
    key.extend(mark_events(&mut chart, run, 0.0, top)?);
    chart.draw_series(
        AreaSeries::new(
            steps(&run.buckets, Bucket::per_sec),
            0.0,
            THROUGHPUT.mix(0.15),
        )
        .border_style(THROUGHPUT.stroke_width(2)),
    )?;
    draw_key(&key_area, &key)
}

fn latency_panel(area: &Area, run: &Run) -> anyhow::Result<()> {
    let (area, key_area) = area.split_horizontally(WIDTH - KEY_WIDTH);
    let end = time_end(run);
    let busy: Vec<&Bucket> = run.buckets.iter().filter(|b| b.ops > 0).collect();
    let low = busy.iter().map(|b| b.p50_us).fold(f64::INFINITY, f64::min);
    let high = busy.iter().map(|b| b.p999_us).fold(0.0, f64::max);
    let (low, high) = if low.is_finite() && high > 0.0 {
        ((low / 2.0).max(0.01), (high * 2.0).max(low * 10.0))
    } else {
        (1.0, 1_000.0)
    };
    let mut chart = ChartBuilder::on(&area)
        .caption(
            format!("{} per second", capitalized(run.latency)),
            (FONT, 19),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(
            0f64..end,
            (low..high)
                .log_scale()
                .with_key_points(log_ticks(low, high)),
        )?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(format!("{} (log scale)", run.latency))
        .y_label_formatter(&|v| duration_us(*v))
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .light_line_style(BLACK.mix(0.04))
        .draw()?;
    let mut key: Vec<(Sample, String)> = PERCENTILES
        .iter()
        .rev()
        .map(|(name, colour)| (Sample::Line(*colour), name.to_string()))
        .collect();
    key.extend(mark_events(&mut chart, run, low, high)?);
    for (k, (_, colour)) in PERCENTILES.iter().enumerate() {
        // One line per stretch of seconds that completed something: an empty second has no
        // latency to draw.
        for stretch in run.buckets.split(|b| b.ops == 0) {
            if !stretch.is_empty() {
                chart.draw_series(LineSeries::new(
                    steps(stretch, |b| b.percentiles()[k].clamp(low, high)),
                    colour.stroke_width(2),
                ))?;
            }
        }
    }
    draw_key(&key_area, &key)
}

/// Where the distribution's x axis has ticks: 1 / (1 - p) for p = 0, 50, 90, 99, 99.9.. %.
fn percentile_ticks(end: f64) -> Vec<f64> {
    let mut ticks = vec![1.0, 2.0];
    let mut x = 10.0;
    while x <= end * 1.0001 {
        ticks.push(x);
        x *= 10.0;
    }
    ticks
}

/// Ticks of a log axis from `low` to `high`: 1, 2 and 5 times the powers of ten.
fn log_ticks(low: f64, high: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let (first, last) = (
        low.max(1e-9).log10().floor() as i32,
        high.max(1e-9).log10().ceil() as i32,
    );
    for e in first..=last {
        for m in [1.0, 2.0, 5.0] {
            let v = m * 10f64.powi(e);
            if (low..=high).contains(&v) {
                ticks.push(v);
            }
        }
    }
    ticks
}

/// The label of x = 1 / (1 - p): "50%", "99.9%".
fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x.max(1.0));
    let decimals = (x.log10().round() as i64 - 2).max(0) as usize;
    format!("{p:.decimals$}%")
}

fn distribution_panel(area: &Area, run: &Run) -> anyhow::Result<()> {
    let (area, key_area) = area.split_horizontally(WIDTH - KEY_WIDTH);
    let h = run.histogram;
    // Out to the percentile the run's count can tell apart from the maximum, 99.99 % at least.
    let decades = (h.len().max(1) as f64).log10().ceil().clamp(4.0, 7.0);
    let end = 10f64.powf(decades);
    let at = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
    let (low, high) = if h.is_empty() {
        (1.0, 1_000.0)
    } else {
        let low = (h.min() as f64 / 1e3 / 2.0).max(0.01);
        (low, (h.max() as f64 / 1e3 * 2.0).max(low * 10.0))
    };
    let caption = if h.is_empty() {
        format!(
            "{} by percentile: nothing completed",
            capitalized(run.latency)
        )
    } else {
        format!(
            "{} by percentile, whole run ({} {})",
            capitalized(run.latency),
            si(h.len() as f64),
            run.unit
        )
    };
    let mut chart = ChartBuilder::on(&area)
        .caption(caption, (FONT, 19))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (1f64..end)
                .log_scale()
                .with_key_points(percentile_ticks(end)),
            (low..high)
                .log_scale()
                .with_key_points(log_ticks(low, high)),
        )?;
    chart
        .configure_mesh()
        .x_desc("percentile (log scale of 1 / (1 - p))")
        .y_desc(format!("{} (log scale)", run.latency))
        .x_label_formatter(&|x| percentile_label(*x))
        .y_label_formatter(&|v| duration_us(*v))
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .light_line_style(BLACK.mix(0.04))
        .draw()?;
    if h.is_empty() {
        return Ok(());
    }
    let points: Vec<(f64, f64)> = (0..=400)
        .map(|i| {
            let x = 10f64.powf(decades * i as f64 / 400.0);
            (x, at(1.0 - 1.0 / x).clamp(low, high))
        })
        .collect();
    chart.draw_series(LineSeries::new(points, DISTRIBUTION.stroke_width(2)))?;
    let mut key = vec![(Sample::Line(DISTRIBUTION), run.latency.to_string())];
    for (name, q) in [
        ("p50", 0.5),
        ("p90", 0.9),
        ("p99", 0.99),
        ("p99.9", 0.999),
        ("p99.99", 0.9999),
    ] {
        key.push((Sample::None, format!("{name} {}", duration_us(at(q)))));
    }
    key.push((
        Sample::None,
        format!("max {}", duration_us(h.max() as f64 / 1e3)),
    ));
    draw_key(&key_area, &key)
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Up to three significant figures, trailing zeros dropped.
fn figures(v: f64) -> String {
    let s = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A rate or count: 950, 12.5k, 3.99M.
fn si(v: f64) -> String {
    match v.abs() {
        a if a >= 1e9 => format!("{}G", figures(v / 1e9)),
        a if a >= 1e6 => format!("{}M", figures(v / 1e6)),
        a if a >= 1e3 => format!("{}k", figures(v / 1e3)),
        _ => figures(v),
    }
}

/// Microseconds as a duration: 250 µs, 1.2 ms, 3 s.
fn duration_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{} s", figures(us / 1e6))
    } else if us >= 1e3 {
        format!("{} ms", figures(us / 1e3))
    } else {
        format!("{} µs", figures(us))
    }
}

#[cfg(test)]
mod tests;
