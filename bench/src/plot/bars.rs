//! Bar charts: grouped or stacked vertical bars, and labelled horizontal bars with a reference line.

#[allow(unused_imports)]
use super::*;

/// One named set of bars, one value per category.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BarSeries {
    /// Legend entry.
    pub name: String,
    /// One value per category (NaN leaves a gap).
    pub values: Vec<f64>,
}

/// Groups of bars: one group per category, one bar per series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BarChart {
    /// Title above the chart.
    pub title: String,
    /// Y axis description.
    pub y_label: String,
    /// Group names along the x axis.
    pub categories: Vec<String>,
    /// The bar sets.
    pub series: Vec<BarSeries>,
    /// Stack the series in one bar per category (parts of a whole, such
    /// as data and metadata bytes) instead of side by side.
    #[serde(default)]
    pub stacked: bool,
}

impl BarChart {
    /// An empty chart over these categories.
    pub fn new<S: Into<String>>(
        title: &str,
        y_label: &str,
        categories: impl IntoIterator<Item = S>,
    ) -> Self {
        BarChart {
            title: title.to_string(),
            y_label: y_label.to_string(),
            categories: categories.into_iter().map(Into::into).collect(),
            series: Vec::new(),
            stacked: false,
        }
    }

    /// Stacks the series: one bar per category, series on top of each
    /// other in the order given (values must not be negative).
    pub fn stacked(mut self) -> Self {
        self.stacked = true;
        self
    }

    /// The bottom and top of each segment `(series, category)` when stacked.
    pub(super) fn segments(&self) -> Vec<Vec<(f64, f64)>> {
        let mut base = vec![0.0; self.categories.len()];
        self.series
            .iter()
            .map(|s| {
                base.iter_mut()
                    .enumerate()
                    .map(|(ci, b)| {
                        let v = s.values.get(ci).copied().unwrap_or(f64::NAN);
                        let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
                        let seg = (*b, *b + v);
                        *b += v;
                        seg
                    })
                    .collect()
            })
            .collect()
    }

    /// Adds a bar set.
    pub fn series(mut self, name: &str, values: Vec<f64>) -> Self {
        self.series.push(BarSeries {
            name: name.to_string(),
            values,
        });
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
        let segments = self.segments();
        let values: Vec<f64> = if self.stacked {
            segments
                .iter()
                .flat_map(|s| s.iter().map(|seg| seg.1))
                .collect()
        } else {
            self.series
                .iter()
                .flat_map(|s| s.values.iter().copied())
                .filter(|v| v.is_finite())
                .collect()
        };
        if self.categories.is_empty() || values.is_empty() {
            return Err(PlotError::NoData);
        }
        let (lo, hi) = crate::stats::min_max(&values).ok_or(PlotError::NoData)?;
        let (y0, _) = pad(lo.min(0.0), hi.max(0.0), 0.08);
        // Room above the bars for the legend (upper right).
        let y1 =
            hi.max(0.0) + (hi.max(0.0) - lo.min(0.0)) * (0.1 + 0.07 * self.series.len() as f64);
        let y0 = if lo >= 0.0 { 0.0 } else { y0 };
        let n = self.categories.len() as f64;

        root.fill(&WHITE).map_err(draw_err)?;
        let body = draw_title(root, &self.title)?;
        let mut chart = ChartBuilder::on(&body)
            .margin(16)
            .x_label_area_size(56)
            .y_label_area_size(76)
            .build_cartesian_2d(0f64..n, y0..y1)
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(&self.y_label)
            .label_style(("sans-serif", LABEL_FONT))
            .axis_desc_style(("sans-serif", AXIS_FONT))
            .y_label_formatter(&|v| format_num(*v))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(draw_err)?;

        let k = if self.stacked {
            1.0
        } else {
            self.series.len().max(1) as f64
        };
        let group = 0.8;
        let width = group / k;
        for (si, s) in self.series.iter().enumerate() {
            let c = colour(si);
            let bars: Vec<_> = if self.stacked {
                segments[si]
                    .iter()
                    .enumerate()
                    .filter(|(_, (lo, hi))| hi > lo)
                    .map(|(ci, &(lo, hi))| {
                        let x = ci as f64 + (1.0 - group) / 2.0;
                        Rectangle::new([(x, lo), (x + width * 0.92, hi)], c.filled())
                    })
                    .collect()
            } else {
                s.values
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.is_finite())
                    .map(|(ci, &v)| {
                        let x = ci as f64 + (1.0 - group) / 2.0 + si as f64 * width;
                        Rectangle::new([(x, 0f64.max(y0)), (x + width * 0.92, v)], c.filled())
                    })
                    .collect()
            };
            chart
                .draw_series(bars)
                .map_err(draw_err)?
                .label(&s.name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(("sans-serif", LABEL_FONT))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(draw_err)?;

        let style =
            TextStyle::from(("sans-serif", LABEL_FONT)).pos(Pos::new(HPos::Center, VPos::Top));
        for (ci, name) in self.categories.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(ci as f64 + 0.5, y0));
            root.draw(&Text::new(name.clone(), (px, py + 8), style.clone()))
                .map_err(draw_err)?;
        }
        Ok(())
    }
}

/// One horizontal bar of a [`HBarChart`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HBar {
    /// The label left of the bar.
    pub label: String,
    /// The bar's length (NaN: no bar, the label says "no value").
    pub value: f64,
    /// A range drawn as a whisker over the bar (for example, per round).
    pub range: Option<(f64, f64)>,
    /// Colour index, one per legend entry.
    pub colour: usize,
    /// Ring the value: measured on shared cores or otherwise suspect.
    pub flagged: bool,
}

/// Labelled horizontal bars (speedups): one bar per row, its value printed
/// at its end, a vertical reference line (1x), colours explained by a
/// legend. Rows are drawn top to bottom in the order given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HBarChart {
    /// Title above the chart.
    pub title: String,
    /// X axis description.
    pub x_label: String,
    /// The bars.
    pub bars: Vec<HBar>,
    /// A vertical line and its label (`1x: no speedup`).
    pub reference: Option<(f64, String)>,
    /// Legend: a name per colour index used.
    pub legend: Vec<(usize, String)>,
    /// Printed after each value (`x`).
    pub suffix: String,
    /// Legend entry for flagged bars.
    pub flagged_label: Option<String>,
}

impl HBarChart {
    /// An empty chart.
    pub fn new(title: &str, x_label: &str) -> Self {
        HBarChart {
            title: title.to_string(),
            x_label: x_label.to_string(),
            bars: Vec::new(),
            reference: None,
            legend: Vec::new(),
            suffix: String::new(),
            flagged_label: None,
        }
    }

    /// Adds a bar.
    pub fn bar(mut self, bar: HBar) -> Self {
        self.bars.push(bar);
        self
    }

    /// Pixel size: 900 wide, 46 px per bar beyond the title and axis.
    pub fn size(&self) -> (u32, u32) {
        let title = title_lines(&self.title).len() as u32;
        let legend = self.legend_rows() as u32;
        (
            900,
            150 + 28 * title + 46 * self.bars.len().max(1) as u32 + 26 * legend,
        )
    }

    /// Legend entries: the reference line, the colours, flagged bars.
    fn legend_rows(&self) -> usize {
        usize::from(self.reference.is_some())
            + self.legend.len()
            + usize::from(self.flagged_label.is_some() && self.bars.iter().any(|b| b.flagged))
    }

    /// Draws the chart to an SVG file.
    pub fn render_svg(&self, path: &Path) -> Result<(), PlotError> {
        let root = SVGBackend::new(path, self.size()).into_drawing_area();
        self.draw(&root)?;
        root.present().map_err(draw_err)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError>
    where
        DB::ErrorType: 'static,
    {
        let mut values: Vec<f64> = Vec::new();
        for b in &self.bars {
            values.push(b.value);
            if let Some((lo, hi)) = b.range {
                values.extend([lo, hi]);
            }
        }
        values.retain(|v| v.is_finite());
        if let Some((r, _)) = &self.reference {
            values.push(*r);
        }
        let (_, hi) = crate::stats::min_max(&values).ok_or(PlotError::NoData)?;
        if self.bars.iter().all(|b| !b.value.is_finite()) {
            return Err(PlotError::NoData);
        }
        // Room right of the longest bar for its value.
        let x1 = hi.max(0.0) * 1.18 + 1e-9;
        let n = self.bars.len() as f64;
        // A band below the bars for the legend (46 px a bar, 26 an entry).
        let band = (self.legend_rows() as f64 * 26.0 + 16.0) / 46.0;
        // Labels of ~8 px per character, at most half the width.
        let longest = self
            .bars
            .iter()
            .map(|b| b.label.chars().count())
            .max()
            .unwrap_or(0);
        let label_px = (longest as u32 * 8 + 24).clamp(80, 450);

        root.fill(&WHITE).map_err(draw_err)?;
        let body = draw_title(root, &self.title)?;
        let mut chart = ChartBuilder::on(&body)
            .margin(16)
            .x_label_area_size(56)
            .y_label_area_size(label_px)
            .build_cartesian_2d(0f64..x1, -band..n)
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc(&self.x_label)
            .x_label_formatter(&|v| format_num(*v))
            .label_style(("sans-serif", LABEL_FONT))
            .axis_desc_style(("sans-serif", AXIS_FONT))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(draw_err)?;
        let label_style =
            TextStyle::from(("sans-serif", LABEL_FONT)).pos(Pos::new(HPos::Right, VPos::Center));
        let value_style =
            TextStyle::from(("sans-serif", LABEL_FONT)).pos(Pos::new(HPos::Left, VPos::Center));
        for (i, b) in self.bars.iter().enumerate() {
            // Row 0 at the top.
            let y = n - i as f64 - 0.5;
            let (lx, ly) = chart.backend_coord(&(0.0, y));
            root.draw(&Text::new(
                b.label.clone(),
                (lx - 10, ly),
                label_style.clone(),
            ))
            .map_err(draw_err)?;
            let c = colour(b.colour);
            if !b.value.is_finite() {
                root.draw(&Text::new("no value", (lx + 6, ly), value_style.clone()))
                    .map_err(draw_err)?;
                continue;
            }
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(0.0, y - 0.32), (b.value.max(0.0), y + 0.32)],
                    c.filled(),
                )))
                .map_err(draw_err)?;
            let mut end = b.value;
            if let Some((lo, hi)) = b.range.filter(|(lo, hi)| lo.is_finite() && hi.is_finite()) {
                chart
                    .draw_series([
                        PathElement::new(vec![(lo, y), (hi, y)], BLACK.stroke_width(2)),
                        PathElement::new(
                            vec![(lo, y - 0.15), (lo, y + 0.15)],
                            BLACK.stroke_width(2),
                        ),
                        PathElement::new(
                            vec![(hi, y - 0.15), (hi, y + 0.15)],
                            BLACK.stroke_width(2),
                        ),
                    ])
                    .map_err(draw_err)?;
                end = end.max(hi);
            }
            let (vx, vy) = chart.backend_coord(&(end, y));
            let text = format!("{}{}", format_num(b.value), self.suffix);
            // A flagged value is ringed right of the bar, before its text.
            let shift = if b.flagged {
                root.draw(&Circle::new((vx + 16, vy), 9, BLACK.stroke_width(2)))
                    .map_err(draw_err)?;
                34
            } else {
                // Clear of a whisker's cap.
                14
            };
            root.draw(&Text::new(text, (vx + shift, vy), value_style.clone()))
                .map_err(draw_err)?;
        }
        if let Some((r, name)) = &self.reference {
            let r = *r;
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(r, 0.0), (r, n)],
                    6,
                    4,
                    BLACK.stroke_width(2),
                ))
                .map_err(draw_err)?
                .label(name)
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(2))
                });
        }
        for (ci, name) in &self.legend {
            let c = colour(*ci);
            chart
                .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                .map_err(draw_err)?
                .label(name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], c.filled()));
        }
        if let Some(label) = &self.flagged_label {
            if self.bars.iter().any(|b| b.flagged) {
                chart
                    .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                    .map_err(draw_err)?
                    .label(label)
                    .legend(|(x, y)| Circle::new((x + 8, y), 7, BLACK.stroke_width(2)));
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font(("sans-serif", LABEL_FONT))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(draw_err)?;
        Ok(())
    }
}
