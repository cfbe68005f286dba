//! `pktgen`: the packet generator for the emulated Ensō NIC. See the crate
//! README for usage.

use std::process::ExitCode;

fn main() -> ExitCode {
    nic_emu::args::quiet_stdout_failures("pktgen");
    pktgen::app::main(std::env::args_os())
}
