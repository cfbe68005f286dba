//! Writes the seed corpora: `enso-fuzz-seeds DIR` makes `DIR/TARGET/NAME`
//! for every seed of every target (the checked-in `fuzz/corpus`).

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: enso-fuzz-seeds DIR");
        std::process::exit(2);
    };
    let dir = std::path::PathBuf::from(dir);
    for (target, name, bytes) in enso_fuzz::seeds::all() {
        let d = dir.join(target);
        if let Err(e) =
            std::fs::create_dir_all(&d).and_then(|()| std::fs::write(d.join(&name), &bytes))
        {
            eprintln!("{}: {e}", d.join(name).display());
            std::process::exit(1);
        }
    }
}
