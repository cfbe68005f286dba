//! Command-line parsing shared by the workspace's binaries: a usage error is
//! one line on stderr (clap's message without its usage block and hints),
//! so every binary reports bad arguments the same way.

use std::time::Duration;

use clap::Parser;

/// Longest time a seconds flag accepts (about 31 years). Far longer values
/// would overflow a [`Duration`] (which panics), and no run lasts that long.
pub const MAX_SECONDS: f64 = 1e9;

/// Checks the value `v` of the seconds flag `flag`: at most
/// [`MAX_SECONDS`], and above zero (or zero too, if `zero_ok`). NaN and
/// infinities are refused.
pub fn seconds(flag: &str, v: f64, zero_ok: bool) -> Result<Duration, SecondsError> {
    let low_ok = if zero_ok { v >= 0.0 } else { v > 0.0 };
    // Every comparison with NaN is false, so NaN fails here too.
    if !(low_ok && v <= MAX_SECONDS) {
        return Err(SecondsError {
            flag: flag.to_string(),
            zero_ok,
            value: v,
        });
    }
    Ok(Duration::from_secs_f64(v))
}

/// A seconds flag's value out of range (see [`seconds`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
// `{:?}` keeps huge values short (1e300, not 301 digits).
#[error(
    "{flag} must be {} and at most {MAX_SECONDS:e} seconds, not {value:?}",
    if *.zero_ok { "0 or more" } else { "above 0" }
)]
pub struct SecondsError {
    /// The flag.
    pub flag: String,
    /// Whether zero was allowed.
    pub zero_ok: bool,
    /// The value given.
    pub value: f64,
}

impl From<SecondsError> for String {
    fn from(e: SecondsError) -> Self {
        e.to_string()
    }
}

/// A flag that SIGINT (Ctrl-C) and SIGTERM set, for a tool that ends its
/// run on either and still reports (and undoes what it set on the device);
/// a second such signal, if the first did not end the run, ends the process
/// at once with status 130.
pub fn stop_on_interrupt() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        // The first registration exits only once the flag is already set.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone());
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    stop
}

/// Parses the process's arguments as `P`. Help and version requests print
/// as clap prints them; a usage error, a missing subcommand included (which
/// clap answers with the whole help), prints `<program>: <message>` on one
/// line and exits with status 2.
///
/// It also makes a failed write to stdout end the process with one line
/// (see [`quiet_stdout_failures`]).
pub fn parse_or_exit<P: Parser>(program: &str) -> P {
    quiet_stdout_failures(program);
    P::try_parse().unwrap_or_else(|e| exit_on::<P>(program, e))
}

/// The ids of the options given on the command line in `m`, as opposed to
/// left at their defaults: a tool refuses an option given where it has no
/// effect instead of silently ignoring it.
pub fn given_on_command_line(m: &clap::ArgMatches) -> Vec<String> {
    m.ids()
        .filter(|id| m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .map(|id| id.to_string())
        .collect()
}

/// [`parse_or_exit`], also returning clap's matches (to tell an option given
/// on the command line from its default, with
/// [`clap::ArgMatches::value_source`]).
pub fn parse_matches_or_exit<P: Parser>(program: &str) -> (P, clap::ArgMatches) {
    quiet_stdout_failures(program);
    P::command()
        .try_get_matches()
        .and_then(|m| {
            P::from_arg_matches(&m)
                .map(|p| (p, m))
                .map_err(|e| e.format(&mut P::command()))
        })
        .unwrap_or_else(|e| exit_on::<P>(program, e))
}

/// Prints help or version as clap does, or a usage error as one line, and
/// exits.
fn exit_on<P: Parser>(program: &str, e: clap::Error) -> ! {
    let line = if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        missing_line(program, &P::command(), std::env::args_os())
    } else if !e.use_stderr() {
        e.exit()
    } else {
        usage_line(&e)
    };
    eprintln!("{program}: {line}");
    std::process::exit(2)
}

/// The one line for a command line `args` (program name first) that stops
/// short of a required subcommand, where clap would print the whole help:
/// which subcommands the deepest command `args` named takes (hidden ones
/// left out), and where the help is.
pub fn missing_line(
    program: &str,
    cmd: &clap::Command,
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> String {
    let mut cmd = cmd;
    let mut path = program.to_string();
    for a in args.into_iter().skip(1) {
        let Some(sub) = a.to_str().and_then(|a| cmd.find_subcommand(a)) else {
            continue;
        };
        cmd = sub;
        path.push(' ');
        path.push_str(sub.get_name());
    }
    let names: Vec<&str> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(clap::Command::get_name)
        .collect();
    if names.is_empty() {
        format!("arguments are required: see {path} --help")
    } else {
        format!(
            "a subcommand is required ({}): see {path} --help",
            names.join(", ")
        )
    }
}

/// A clap error's message on one line: its first paragraph (the message and
/// what clap lists under it: accepted values, missing arguments), without
/// the `error: ` prefix, the usage block and hints.
pub fn usage_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    text.lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
        .trim_start_matches("error: ")
        .to_string()
}

/// `println!` panics when stdout is gone (a closed pipe: `bench ... | head`)
/// or full, which prints a panic message and, with `RUST_BACKTRACE` set, a
/// backtrace. This hook turns exactly that panic into what command-line
/// tools do: a closed pipe ends the process quietly with the status a
/// SIGPIPE death reports (141); any other write failure prints one line,
/// `<program>: failed printing to stdout: <error>`, and exits with 1. Every
/// other panic goes to the previous hook unchanged. (Restoring the default
/// SIGPIPE action instead would also kill a process that writes to a
/// control socket whose peer has gone, where an error is wanted.)
pub fn quiet_stdout_failures(program: &str) {
    let program = program.to_string();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") {
            if msg.contains("Broken pipe") {
                std::process::exit(141);
            }
            eprintln!("{program}: {msg}");
            std::process::exit(1);
        }
        previous(info)
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[derive(Parser, Debug)]
    struct Demo {
        #[arg(long)]
        size: u16,
        #[arg(long, conflicts_with = "size")]
        sizes: Option<String>,
    }

    #[derive(Parser, Debug)]
    struct Mode {
        #[arg(long, value_parser = ["rx", "echo"])]
        mode: String,
    }

    #[derive(Parser, Debug)]
    #[command(name = "tool")]
    struct Tool {
        #[command(subcommand)]
        cmd: Sub,
    }

    #[derive(clap::Subcommand, Debug)]
    enum Sub {
        Run,
        Stats,
        Group {
            #[command(subcommand)]
            inner: Inner,
        },
        #[command(hide = true)]
        Worker,
    }

    #[derive(clap::Subcommand, Debug)]
    enum Inner {
        First,
        Second,
    }

    #[test]
    fn a_missing_subcommand_is_one_line_naming_the_subcommands() {
        use clap::error::ErrorKind;
        for (argv, line) in [
            (
                vec!["tool"],
                "a subcommand is required (run, stats, group): see tool --help",
            ),
            (
                vec!["tool", "group"],
                "a subcommand is required (first, second): see tool group --help",
            ),
        ] {
            // What clap answers with its whole help ...
            let e = Tool::try_parse_from(&argv).expect_err("no subcommand");
            assert_eq!(
                e.kind(),
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand,
                "{argv:?}"
            );
            assert!(e.render().to_string().lines().count() > 1);
            // ... is one line.
            let args = argv.iter().map(std::ffi::OsString::from);
            assert_eq!(missing_line("tool", &Tool::command(), args), line);
        }
    }

    #[test]
    fn usage_errors_become_one_line() {
        for (argv, names) in [
            (vec!["demo", "--size", "70000"], "--size"),
            (vec!["demo", "--size", "64", "--sizes", "1,2"], "--sizes"),
            (vec!["demo", "--bogus"], "--bogus"),
            (vec!["demo"], "--size"),
        ] {
            let e = Demo::try_parse_from(&argv).expect_err("bad arguments");
            let line = usage_line(&e);
            assert!(
                !line.is_empty() && !line.contains('\n'),
                "{argv:?}: {line:?}"
            );
            assert!(!line.starts_with("error:"), "{line}");
            assert!(line.contains(names), "{argv:?}: {line:?} names no {names}");
            assert!(
                !line.contains("Usage") && !line.contains("--help"),
                "{line}"
            );
            assert!(
                e.render().to_string().lines().count() > 1,
                "clap's own text is longer"
            );
        }
        let e = Mode::try_parse_from(["mode", "--mode", "fast"]).unwrap_err();
        assert!(
            usage_line(&e).ends_with("[possible values: rx, echo]"),
            "{}",
            usage_line(&e)
        );
        let e = Demo::try_parse_from(["demo", "--size", "x"]).unwrap_err();
        assert!(usage_line(&e).contains("--size"), "{}", usage_line(&e));
    }
}
