//! `pktgen`: the packet generator for the emulated Ensō NIC. See the crate
//! README for usage.

use std::process::ExitCode;

fn main() -> ExitCode {
    pktgen::app::main(std::env::args_os())
}
