//! Line and grouped bar charts as SVG, the two shapes the paper's figures
//! take (rate vs packet size per interface; a metric per app per interface).

use std::fmt;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::{Deserialize, Serialize};

mod bars;
pub use bars::*;

/// Pixel size of every chart.
const SIZE: (u32, u32) = (900, 540);
/// Colour-blind-safe series colours (Okabe–Ito), cycled.
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// Font sizes (plotters' units) of tick labels and legends, of axis
/// descriptions, and of a title's first line and the lines after it.
const LABEL_FONT: u32 = 17;
const AXIS_FONT: u32 = 19;
const TITLE_FONT: u32 = 24;
const SUBTITLE_FONT: u32 = 19;
/// Characters of a title line at most (the first paragraph, in the larger
/// font, and the others): longer titles wrap at spaces.
const TITLE_CHARS: usize = 80;
const SUBTITLE_CHARS: usize = 104;

/// Breaks `title` into lines of at most `width` characters at spaces (a
/// longer word stands alone); a newline always breaks.
pub fn wrap(title: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for para in title.split('\n') {
        let mut line = String::new();
        for word in para.split_whitespace() {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        if !line.is_empty() {
            lines.push(line);
        }
    }
    lines
}

/// A title's lines, each with its paragraph's index: the first paragraph
/// (up to the first newline) wraps at [`TITLE_CHARS`], the rest at
/// [`SUBTITLE_CHARS`].
fn title_lines(title: &str) -> Vec<(usize, String)> {
    let (first, rest) = title.split_once('\n').unwrap_or((title, ""));
    let mut v: Vec<(usize, String)> = wrap(first, TITLE_CHARS)
        .into_iter()
        .map(|l| (0, l))
        .collect();
    v.extend(wrap(rest, SUBTITLE_CHARS).into_iter().map(|l| (1, l)));
    v
}

/// Draws the title, wrapped, at the top of `root` (the first line larger),
/// and returns the area below it.
fn draw_title<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
) -> Result<DrawingArea<DB, Shift>, PlotError>
where
    DB::ErrorType: 'static,
{
    let (w, _) = root.dim_in_pixel();
    let mut y = 10i32;
    for (i, line) in title_lines(title) {
        let size = if i == 0 { TITLE_FONT } else { SUBTITLE_FONT };
        let style = TextStyle::from(("sans-serif", size)).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(line.clone(), (w as i32 / 2, y), style))
            .map_err(draw_err)?;
        y += size as i32 + 4;
    }
    let (_, body) = root.split_vertically(y + 4);
    Ok(body)
}

/// Why a chart could not be drawn.
#[derive(Debug)]
pub enum PlotError {
    /// The chart has no finite data point to draw.
    NoData,
    /// A log-scale axis got a value that is not positive.
    NonPositiveOnLogAxis(f64),
    /// The drawing backend failed (for example, writing the file).
    Draw(String),
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlotError::NoData => write!(f, "chart has no data to draw"),
            PlotError::NonPositiveOnLogAxis(x) => write!(f, "value {x} on a log axis"),
            PlotError::Draw(e) => write!(f, "drawing failed: {e}"),
        }
    }
}

impl std::error::Error for PlotError {}

fn draw_err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// One named line of `(x, y)` points.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Points, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Colour index (default: the series' position).
    #[serde(default)]
    pub colour: Option<usize>,
    /// Dashed line and triangle markers instead of a solid line and dots.
    #[serde(default)]
    pub dashed: bool,
    /// Points to ring as suspect (for example, measured while the cores
    /// were shared), by index into `points`.
    #[serde(default)]
    pub flagged: Vec<usize>,
}

impl Series {
    /// A series from a name and points.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            colour: None,
            dashed: false,
            flagged: Vec::new(),
        }
    }
}

/// Lines with markers over a numeric x axis (linear or log10).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LineChart {
    /// Title above the chart.
    pub title: String,
    /// X axis description.
    pub x_label: String,
    /// Y axis description.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
    /// Log-scale x axis (packet sizes, offered loads).
    pub log_x: bool,
    /// Log-scale y axis (latencies spanning decades).
    #[serde(default)]
    pub log_y: bool,
    /// Legend entry for flagged points (none: no entry).
    #[serde(default)]
    pub flagged_label: Option<String>,
    /// Start the y axis at zero rather than at the smallest value.
    pub y_from_zero: bool,
    /// Where to label the x axis; by default the data's own x values on a
    /// log axis (packet sizes: 64, 128, …, 1518) when there are at most 12,
    /// else evenly spaced values.
    pub x_ticks: Option<Vec<f64>>,
}

impl LineChart {
    /// A linear chart with the y axis from zero.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Self {
        LineChart {
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            series: Vec::new(),
            log_x: false,
            log_y: false,
            flagged_label: None,
            y_from_zero: true,
            x_ticks: None,
        }
    }

    /// Adds a styled line (colour, dashes, flagged points).
    pub fn push(mut self, series: Series) -> Self {
        self.series.push(series);
        self
    }

    /// Uses a log10 y axis, labelled at 1, 2, 5 x 10^k.
    pub fn log_y(mut self) -> Self {
        self.log_y = true;
        self.y_from_zero = false;
        self
    }

    /// Names flagged points in the legend.
    pub fn flagged_label(mut self, label: &str) -> Self {
        self.flagged_label = Some(label.to_string());
        self
    }

    /// Labels the x axis at exactly these values.
    pub fn x_ticks(mut self, ticks: Vec<f64>) -> Self {
        self.x_ticks = Some(ticks);
        self
    }

    /// The x values to label (untransformed), if not left to the mesh.
    fn ticks(&self) -> Option<Vec<f64>> {
        if let Some(t) = &self.x_ticks {
            return Some(t.clone());
        }
        if !self.log_x {
            return None;
        }
        let mut xs: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        if xs.len() <= 12 {
            return Some(xs);
        }
        // 1, 2, 5 x 10^k across the data.
        let (lo, hi) = (xs[0], xs[xs.len() - 1]);
        let mut ticks = Vec::new();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi {
            for m in [1.0, 2.0, 5.0] {
                let t = m * decade;
                if (lo..=hi).contains(&t) {
                    ticks.push(t);
                }
            }
            decade *= 10.0;
        }
        Some(ticks)
    }

    /// Adds a line.
    pub fn series(mut self, name: &str, points: Vec<(f64, f64)>) -> Self {
        self.series.push(Series::new(name, points));
        self
    }

    /// Uses a log10 x axis.
    pub fn log_x(mut self) -> Self {
        self.log_x = true;
        self
    }

    /// Draws the chart to an SVG file.
    pub fn render_svg(&self, path: &Path) -> Result<(), PlotError> {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        self.draw(&root)?;
        root.present().map_err(draw_err)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError>
    where
        DB::ErrorType: 'static,
    {
        let tx = |x: f64| if self.log_x { x.log10() } else { x };
        let ty = |y: f64| if self.log_y { y.log10() } else { y };
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for s in &self.series {
            for &(x, y) in &s.points {
                if self.log_x && x <= 0.0 {
                    return Err(PlotError::NonPositiveOnLogAxis(x));
                }
                if self.log_y && y <= 0.0 {
                    return Err(PlotError::NonPositiveOnLogAxis(y));
                }
                if x.is_finite() && y.is_finite() {
                    xs.push(tx(x));
                    ys.push(ty(y));
                }
            }
        }
        let (x0, x1) = crate::stats::min_max(&xs).ok_or(PlotError::NoData)?;
        let (y0, y1) = crate::stats::min_max(&ys).ok_or(PlotError::NoData)?;
        let (x0, x1) = pad(x0, x1, 0.03);
        let y0 = if self.y_from_zero { y0.min(0.0) } else { y0 };
        let (y0, y1) = pad(y0, y1, 0.05);
        let y0 = if self.y_from_zero && y0 < 0.0 && ys.iter().all(|&y| y >= 0.0) {
            0.0
        } else {
            y0
        };

        root.fill(&WHITE).map_err(draw_err)?;
        let body = draw_title(root, &self.title)?;
        let mut chart = ChartBuilder::on(&body)
            .margin(16)
            .x_label_area_size(56)
            .y_label_area_size(76)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(draw_err)?;
        let ticks = self.ticks();
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .label_style(("sans-serif", LABEL_FONT))
            .axis_desc_style(("sans-serif", AXIS_FONT))
            .x_label_formatter(&|v| format_num(*v))
            .y_label_formatter(&|v| format_num(*v))
            .light_line_style(WHITE.mix(0.0));
        if ticks.is_some() {
            mesh.x_labels(0).disable_x_mesh();
        }
        if self.log_y {
            mesh.y_labels(0).disable_y_mesh();
        }
        mesh.draw().map_err(draw_err)?;
        if self.log_y {
            let grid = RGBColor(0, 0, 0).mix(0.15);
            let style = TextStyle::from(("sans-serif", LABEL_FONT))
                .pos(Pos::new(HPos::Right, VPos::Center));
            for t in decade_ticks(10f64.powf(y0), 10f64.powf(y1)) {
                let v = t.log10();
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x0, v), (x1, v)],
                        grid,
                    )))
                    .map_err(draw_err)?;
                let (px, py) = chart.backend_coord(&(x0, v));
                root.draw(&PathElement::new(vec![(px - 5, py), (px, py)], BLACK))
                    .map_err(draw_err)?;
                root.draw(&Text::new(format_num(t), (px - 8, py), style.clone()))
                    .map_err(draw_err)?;
            }
        }
        if let Some(ticks) = ticks {
            let grid = RGBColor(0, 0, 0).mix(0.15);
            let style =
                TextStyle::from(("sans-serif", LABEL_FONT)).pos(Pos::new(HPos::Center, VPos::Top));
            for t in ticks.into_iter().map(tx).filter(|t| (x0..=x1).contains(t)) {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(t, y0), (t, y1)],
                        grid,
                    )))
                    .map_err(draw_err)?;
                let (px, py) = chart.backend_coord(&(t, y0));
                let label = format_num(if self.log_x { 10f64.powf(t) } else { t });
                root.draw(&PathElement::new(vec![(px, py), (px, py + 5)], BLACK))
                    .map_err(draw_err)?;
                root.draw(&Text::new(label, (px, py + 8), style.clone()))
                    .map_err(draw_err)?;
            }
        }
        for (i, s) in self.series.iter().enumerate() {
            let c = colour(s.colour.unwrap_or(i));
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&(x, y)| (tx(x), ty(y)))
                .collect();
            if s.dashed {
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, c.stroke_width(2)))
                    .map_err(draw_err)?
                    .label(&s.name)
                    .legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(0, 0), (7, 0)], c.stroke_width(2))
                            + PathElement::new(vec![(12, 0), (20, 0)], c.stroke_width(2))
                            + TriangleMarker::new((10, 0), 5, c.filled())
                    });
                chart
                    .draw_series(pts.iter().map(|&p| TriangleMarker::new(p, 5, c.filled())))
                    .map_err(draw_err)?;
            } else {
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                    .map_err(draw_err)?
                    .label(&s.name)
                    .legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(0, 0), (20, 0)], c.stroke_width(2))
                            + Circle::new((10, 0), 3, c.filled())
                    });
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
                    .map_err(draw_err)?;
            }
            let flagged: Vec<(f64, f64)> = s
                .flagged
                .iter()
                .filter_map(|&j| s.points.get(j))
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&(x, y)| (tx(x), ty(y)))
                .collect();
            chart
                .draw_series(
                    flagged
                        .into_iter()
                        .map(|p| Circle::new(p, 8, BLACK.stroke_width(1))),
                )
                .map_err(draw_err)?;
        }
        if let Some(label) = &self.flagged_label {
            if self.series.iter().any(|s| !s.flagged.is_empty()) {
                chart
                    .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                    .map_err(draw_err)?
                    .label(label)
                    .legend(|(x, y)| Circle::new((x + 10, y), 7, BLACK.stroke_width(1)));
            }
        }
        // Put the legend in the corner with the fewest points under it.
        let all: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|(x, y)| ((tx(x) - x0) / (x1 - x0), (ty(y) - y0) / (y1 - y0)))
            .collect();
        let position = legend_corner(&all);
        chart
            .configure_series_labels()
            .position(position)
            .label_font(("sans-serif", LABEL_FONT))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(draw_err)?;
        Ok(())
    }
}

/// The corner for a legend: the one whose box (the outer 45% of the
/// width, 40% of the height) holds the fewest of `points` (as fractions of
/// the axes, 0..1 from the lower left); ties go to the upper right, then
/// upper left, lower right, lower left.
fn legend_corner(points: &[(f64, f64)]) -> SeriesLabelPosition {
    let corners = [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::LowerLeft, false, false),
    ];
    let count = |right: bool, upper: bool| {
        points
            .iter()
            .filter(|(x, y)| {
                (if right { *x >= 0.55 } else { *x <= 0.45 })
                    && (if upper { *y >= 0.6 } else { *y <= 0.4 })
            })
            .count()
    };
    let mut best = 0;
    let mut least = usize::MAX;
    for (i, c) in corners.iter().enumerate() {
        let n = count(c.1, c.2);
        if n < least {
            least = n;
            best = i;
        }
    }
    let [a, b, c, d] = corners.map(|c| c.0);
    match best {
        0 => a,
        1 => b,
        2 => c,
        _ => d,
    }
}

/// 1, 2, 5 x 10^k between `lo` and `hi` (both positive).
fn decade_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return ticks;
    }
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let t = m * decade;
            if (lo..=hi).contains(&t) {
                ticks.push(t);
            }
        }
        decade *= 10.0;
    }
    ticks
}

/// Renders an SVG file to PNG, `scale` times its size, with text in the
/// machine's fonts.
///
/// resvg draws it in this process: a pure-Rust renderer kept by the
/// linebender project, with no system library to install (calling the
/// `rsvg-convert` program instead would make the PNGs depend on a tool
/// the machine may not have). It needs a font database to draw text: the
/// system's fonts are loaded, and the generic `sans-serif` of the SVGs
/// (plotters writes that family) is mapped to DejaVu Sans, Liberation
/// Sans or Noto Sans when the machine has one, else to the first font it
/// has. Without any font the figure is drawn without its text, and the
/// error says so.
pub fn svg_to_png(svg: &Path, png: &Path, scale: f32) -> Result<(), PlotError> {
    use resvg::{tiny_skia, usvg};
    let data =
        std::fs::read(svg).map_err(|e| PlotError::Draw(format!("{}: {e}", svg.display())))?;
    let mut opt = usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_system_fonts();
    let families: Vec<String> = db
        .faces()
        .flat_map(|f| f.families.iter().map(|(n, _)| n.clone()))
        .collect();
    if families.is_empty() {
        return Err(PlotError::Draw(
            "no fonts on this machine to draw the figures' text (install fonts-dejavu-core)".into(),
        ));
    }
    let sans = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "Arial"]
        .into_iter()
        .find(|f| families.iter().any(|g| g == f))
        .map_or_else(|| families[0].clone(), str::to_string);
    db.set_sans_serif_family(sans);
    let tree = usvg::Tree::from_data(&data, &opt)
        .map_err(|e| PlotError::Draw(format!("{}: {e}", svg.display())))?;
    let size =
        tree.size().to_int_size().scale_by(scale).ok_or_else(|| {
            PlotError::Draw(format!("{}: cannot scale by {scale}", svg.display()))
        })?;
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| PlotError::Draw(format!("{}: empty image", svg.display())))?;
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .save_png(png)
        .map_err(|e| PlotError::Draw(format!("{}: {e}", png.display())))
}

/// Widens `[lo, hi]` by `frac` of its span on each side (or by 1 if empty).
fn pad(lo: f64, hi: f64, frac: f64) -> (f64, f64) {
    let span = hi - lo;
    if span > 0.0 {
        (lo - span * frac, hi + span * frac)
    } else {
        (lo - 1.0, hi + 1.0)
    }
}

/// Short axis labels: 1500, 12.5, 0.25, 3e-5.
fn format_num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if !(1e-3..1e6).contains(&a) {
        format!("{v:.1e}")
    } else if a >= 100.0 || (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests;
