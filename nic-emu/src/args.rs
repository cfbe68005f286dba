//! Command-line parsing shared by the workspace's binaries (see
//! [`cli_common::args`]), and the host-tuning flags of every binary that
//! runs an engine.

pub use cli_common::args::*;

/// The host-tuning flags, one group in every binary that runs an engine
/// (see [`crate::HostTuning`]): how the emulation uses its CPU core. None
/// of them changes what an application sees.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[command(next_help_heading = "Host tuning (how the emulation uses its CPU core)")]
pub struct HostTuningArgs {
    /// While saturated, apply posted register writes after this many
    /// flits of received frames (0: every step, as when not saturated).
    #[arg(long, default_value_t = crate::config::DEFAULT_REGISTER_POLL_FLITS)]
    pub register_poll_flits: u32,
    /// ... or after this many ns, whichever comes first (0: every step).
    #[arg(long, default_value_t = crate::config::DEFAULT_REGISTER_POLL_NS)]
    pub register_poll_ns: u64,
    /// For each 64 B frame written into a pipe, evict the pipe line this
    /// many lines ahead from the engine's own caches (0: never; at most
    /// half a pipe). Keeps an RX-only application from stalling the
    /// engine when the two cores are in different core complexes.
    #[arg(long, default_value_t = crate::config::DEFAULT_EVICT_AHEAD_LINES)]
    pub evict_ahead_lines: u32,
    /// Always evict ahead (see --evict-ahead-lines). By default the
    /// engine compares, every so often while it runs, its busy time per
    /// frame with and without evicting and keeps the cheaper: which one
    /// is depends on where the host places the engine's and the
    /// application's cores, and it can move them during a run.
    #[arg(long)]
    pub evict_ahead_always: bool,
    /// Write frames of one or two lines into pipes this way throughout,
    /// rather than let the engine choose while it runs (overrides
    /// --evict-ahead-always).
    #[arg(long, value_enum)]
    pub pipe_writes: Option<crate::PipeWriteMode>,
    /// Keep the lines of TX-pipe data the engine has read in its caches
    /// (by default it evicts them, so that the application's next write
    /// there does not stall on the engine's copy).
    #[arg(long)]
    pub keep_tx_lines: bool,
}

impl HostTuningArgs {
    /// The settings these flags name.
    pub fn tuning(&self) -> crate::HostTuning {
        crate::HostTuning {
            register_poll_flits: self.register_poll_flits,
            register_poll_ns: self.register_poll_ns,
            evict_ahead_lines: self.evict_ahead_lines,
            evict_ahead_adaptive: !self.evict_ahead_always,
            pipe_writes: self.pipe_writes,
            evict_tx_lines: !self.keep_tx_lines,
        }
    }
}

#[cfg(test)]
mod host_tuning_tests {
    use super::HostTuningArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        tuning: HostTuningArgs,
    }

    #[test]
    fn no_flags_give_the_default_tuning() {
        let cli = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(cli.tuning.tuning(), crate::HostTuning::default());
    }

    #[test]
    fn each_flag_sets_its_setting() {
        let cli = Cli::try_parse_from([
            "x",
            "--register-poll-flits",
            "7",
            "--register-poll-ns",
            "9",
            "--evict-ahead-lines",
            "3",
            "--evict-ahead-always",
            "--pipe-writes",
            "non-temporal",
            "--keep-tx-lines",
        ])
        .unwrap();
        let t = cli.tuning.tuning();
        assert_eq!(
            (
                t.register_poll_flits,
                t.register_poll_ns,
                t.evict_ahead_lines
            ),
            (7, 9, 3)
        );
        assert!(!t.evict_ahead_adaptive && !t.evict_tx_lines);
        assert_eq!(t.pipe_writes, Some(crate::PipeWriteMode::NonTemporal));
    }
}
