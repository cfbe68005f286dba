//! Progress of long runs, on stderr.
//!
//! Three behaviours, chosen once: hidden (with `--json`, so stdout carries
//! only the result and stderr stays quiet); a progress bar when stderr is a
//! terminal; otherwise one plain line per interval (logs, CI).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the plain-line mode prints.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

enum Mode {
    Hidden,
    Bar(ProgressBar),
    Lines {
        interval: Duration,
        last: Option<Instant>,
    },
}

/// A progress display for `total` steps of a run called `label`.
pub struct Progress {
    mode: Mode,
    label: String,
    total: u64,
    done: u64,
    started: Instant,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("label", &self.label)
            .field("done", &self.done)
            .field("total", &self.total)
            .finish()
    }
}

impl Progress {
    /// A display that shows nothing.
    pub fn hidden() -> Self {
        Self::with_mode(Mode::Hidden, "", 0)
    }

    /// Hidden if `quiet`, a bar if stderr is a terminal, lines otherwise.
    pub fn new(label: &str, total: u64, quiet: bool) -> Self {
        if quiet {
            Self::hidden()
        } else if std::io::stderr().is_terminal() {
            Self::bar(label, total)
        } else {
            Self::lines(label, total, DEFAULT_INTERVAL)
        }
    }

    /// A progress bar on stderr.
    pub fn bar(label: &str, total: u64) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
            )
            .expect("valid template"),
        );
        bar.set_prefix(label.to_string());
        Self::with_mode(Mode::Bar(bar), label, total)
    }

    /// One plain stderr line at most every `interval` (and at the end).
    pub fn lines(label: &str, total: u64, interval: Duration) -> Self {
        Self::with_mode(
            Mode::Lines {
                interval,
                last: None,
            },
            label,
            total,
        )
    }

    fn with_mode(mode: Mode, label: &str, total: u64) -> Self {
        Progress {
            mode,
            label: label.to_string(),
            total,
            done: 0,
            started: Instant::now(),
        }
    }

    /// Whether anything is shown.
    pub fn is_hidden(&self) -> bool {
        matches!(self.mode, Mode::Hidden)
    }

    /// Steps completed so far.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// `n` more steps are done; `message` says what the last one measured.
    pub fn step(&mut self, n: u64, message: &str) {
        self.done += n;
        let line = self.line(message);
        match &mut self.mode {
            Mode::Hidden => {}
            Mode::Bar(bar) => {
                bar.set_message(message.to_string());
                bar.inc(n);
            }
            Mode::Lines { interval, last } => {
                let now = Instant::now();
                let due = last.is_none_or(|t| now.duration_since(t) >= *interval);
                if due || self.done >= self.total {
                    *last = Some(now);
                    eprintln!("{line}");
                }
            }
        }
    }

    /// Prints a line that is not a step (a note, a warning), above the bar.
    pub fn note(&self, message: &str) {
        match &self.mode {
            Mode::Hidden => {}
            Mode::Bar(bar) => bar.println(message),
            Mode::Lines { .. } => eprintln!("{message}"),
        }
    }

    /// Ends the display (clears the bar).
    pub fn finish(&mut self) {
        if let Mode::Bar(bar) = &self.mode {
            bar.finish_and_clear();
        }
    }

    fn line(&self, message: &str) -> String {
        format!(
            "[{} {:>4.1}s {}/{}] {}",
            self.label,
            self.started.elapsed().as_secs_f64(),
            self.done,
            self.total,
            message
        )
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_counted_in_every_mode() {
        for mut p in [
            Progress::hidden(),
            Progress::lines("t", 3, Duration::from_secs(3600)),
            Progress::new("t", 3, true),
        ] {
            p.step(1, "a");
            p.step(2, "b");
            p.note("note");
            assert_eq!(p.done(), 3);
            p.finish();
        }
        assert!(Progress::new("t", 1, true).is_hidden());
    }
}
