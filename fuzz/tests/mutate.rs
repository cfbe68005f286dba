//! A short, deterministic, coverage-blind fuzz of every target from its
//! seeds (byte flips, insertions, cuts, splices), so that the harnesses
//! and the code under them meet varied input on every test run without
//! AFL++. The coverage-guided runs are `fuzz/run.sh`.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(8) {
        match rng.below(6) {
            0 | 1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            3 => {
                let i = rng.below(v.len() + 1);
                v.insert(i, rng.next() as u8);
            }
            4 if !v.is_empty() => {
                v.truncate(rng.below(v.len()));
            }
            _ => {
                let cut = rng.below(v.len() + 1);
                v.truncate(cut);
                v.extend_from_slice(&other[rng.below(other.len() + 1)..]);
            }
        }
    }
    v
}

#[test]
fn mutated_seeds_pass_every_harness() {
    let seeds = enso_fuzz::seeds::all();
    for t in enso_fuzz::TARGETS {
        let mine: Vec<&Vec<u8>> = seeds
            .iter()
            .filter(|s| s.0 == t.name)
            .map(|s| &s.2)
            .collect();
        assert!(!mine.is_empty(), "{}: no seeds", t.name);
        let rounds = if t.name == "engine" { 150 } else { 1000 };
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ t.name.len() as u64);
        for _ in 0..rounds {
            let a = mine[rng.below(mine.len())];
            let b = mine[rng.below(mine.len())];
            let input = mutate(&mut rng, a, b);
            (t.run)(&input);
        }
    }
}
