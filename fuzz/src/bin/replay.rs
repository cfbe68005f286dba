//! Replays inputs through a target's harness: `enso-fuzz-replay TARGET
//! FILE...` (a directory stands for the files in it). Prints one line per
//! input; a failing invariant panics with the input's name, as a finding
//! does under the fuzzer.

use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_default();
    let Some(target) = enso_fuzz::target(&name) else {
        let names: Vec<_> = enso_fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!(
            "usage: enso-fuzz-replay TARGET FILE... (TARGET one of {})",
            names.join(", ")
        );
        std::process::exit(2);
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for a in args {
        let p = PathBuf::from(a);
        match std::fs::read_dir(&p) {
            Ok(dir) => {
                let mut v: Vec<_> = dir
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_file())
                    .collect();
                v.sort();
                files.extend(v);
            }
            Err(_) => files.push(p),
        }
    }
    for f in files {
        let data = match std::fs::read(&f) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("{}: {e}", f.display());
                std::process::exit(1);
            }
        };
        println!("{}: {} bytes", f.display(), data.len());
        (target.run)(&data);
    }
}
