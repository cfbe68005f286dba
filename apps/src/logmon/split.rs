//! Verifying a pattern from its required string outwards.
//!
//! A pattern whose top level is a concatenation `P L S`, with `L` the
//! literal the prefilter looks for, matches a line exactly when some
//! occurrence of `L` (at `k`) has `S` matching from `k + |L|` onwards and
//! `P` matching backwards from `k`. [`Split`] checks exactly that with two
//! anchored, fully compiled DFAs: `S` forwards, then `P` in reverse. A
//! verification then walks only the bytes of the match around the string,
//! and a line that holds the string but not the event (an nginx access line
//! with a 200 status, sshd's "Failed to release session") is rejected a few
//! bytes after it, where the pattern's own regex started at the line's
//! beginning (or at its first literal) and walked up to there. The same
//! split is how `regex-automata`'s meta engine handles an inner literal
//! ("reverse inner"); it does not choose it when, as here, the pattern also
//! starts with a literal, and it needs the whole line either way.

use std::sync::Arc;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::{Anchored, Input};
use regex_syntax::hir::{Hir, HirKind};

/// Bound on each DFA (and on its construction's working memory): a pattern
/// whose halves would be larger is verified with its own regex instead.
const DFA_LIMIT: usize = 4 << 20;

/// A pattern split around its required string.
#[derive(Clone, Debug)]
pub(super) struct Split {
    /// Finds the string.
    lit: memchr::memmem::Finder<'static>,
    /// The part after the string, forwards, anchored.
    suffix: Arc<dense::DFA<Vec<u32>>>,
    /// The part before the string, compiled in reverse, anchored.
    prefix: Arc<dense::DFA<Vec<u32>>>,
}

impl Split {
    /// The split of `hir` around `lit`, if `lit` lies within a literal that
    /// is a direct part of `hir`'s top-level concatenation (and both halves
    /// compile within [`DFA_LIMIT`]).
    pub(super) fn new(hir: &Hir, lit: &[u8]) -> Option<Split> {
        if lit.is_empty() {
            return None;
        }
        let parts: &[Hir] = match hir.kind() {
            HirKind::Concat(parts) => parts,
            HirKind::Literal(_) => std::slice::from_ref(hir),
            _ => return None,
        };
        let (j, at) = parts
            .iter()
            .enumerate()
            .find_map(|(j, part)| match part.kind() {
                HirKind::Literal(l) => {
                    l.0.windows(lit.len())
                        .position(|w| w == lit)
                        .map(|at| (j, at))
                }
                _ => None,
            })?;
        let HirKind::Literal(full) = parts[j].kind() else {
            return None;
        };
        let full = &full.0;
        let mut before = parts[..j].to_vec();
        before.push(Hir::literal(&full[..at]));
        let mut after = vec![Hir::literal(&full[at + lit.len()..])];
        after.extend_from_slice(&parts[j + 1..]);
        Some(Split {
            lit: memchr::memmem::Finder::new(lit).into_owned(),
            suffix: Arc::new(anchored_dfa(&Hir::concat(after), false)?),
            prefix: Arc::new(anchored_dfa(&Hir::concat(before), true)?),
        })
    }

    /// Whether the pattern matches somewhere in `line`, trying first the
    /// occurrence of the string at `hint` if there is one there; `None` if
    /// a DFA could not answer (it has no quit bytes, so this does not
    /// happen, but the caller then asks the pattern's own regex rather than
    /// guess).
    #[inline]
    pub(super) fn is_match(&self, line: &[u8], hint: Option<usize>) -> Option<bool> {
        let len = self.lit.needle().len();
        let hint = hint.filter(|&k| line.get(k..k + len) == Some(self.lit.needle()));
        if let Some(k) = hint {
            if self.matches_at(line, k)? {
                return Some(true);
            }
        }
        let mut from = 0;
        while let Some(i) = self.lit.find(&line[from..]) {
            let k = from + i;
            if Some(k) != hint && self.matches_at(line, k)? {
                return Some(true);
            }
            // Occurrences may overlap ("aa" in "aaa"): try every start.
            from = k + 1;
        }
        Some(false)
    }

    /// Whether the match can be made around the string at `k`.
    #[inline]
    fn matches_at(&self, line: &[u8], k: usize) -> Option<bool> {
        let after = Input::new(line)
            .range(k + self.lit.needle().len()..)
            .anchored(Anchored::Yes)
            .earliest(true);
        if self.suffix.try_search_fwd(&after).ok()?.is_none() {
            return Some(false);
        }
        let before = Input::new(line)
            .range(..k)
            .anchored(Anchored::Yes)
            .earliest(true);
        Some(self.prefix.try_search_rev(&before).ok()?.is_some())
    }
}

/// An anchored-only DFA for `hir`, matching forwards or (`reverse`) the
/// reversed language for a reverse search.
fn anchored_dfa(hir: &Hir, reverse: bool) -> Option<dense::DFA<Vec<u32>>> {
    let nfa = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .reverse(reverse)
                .utf8(false)
                .which_captures(WhichCaptures::None),
        )
        .build_from_hir(hir)
        .ok()?;
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .start_kind(StartKind::Anchored)
                .dfa_size_limit(Some(DFA_LIMIT))
                .determinize_size_limit(Some(DFA_LIMIT)),
        )
        .build_from_nfa(&nfa)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::meta::Regex;

    fn parse(p: &str) -> Hir {
        regex_syntax::ParserBuilder::new()
            .utf8(false)
            .unicode(false)
            .build()
            .parse(p)
            .unwrap()
    }

    fn reference(p: &str) -> Regex {
        Regex::builder()
            .syntax(
                regex_automata::util::syntax::Config::new()
                    .utf8(false)
                    .unicode(false),
            )
            .build(p)
            .unwrap()
    }

    /// The split agrees with the whole regex on every line given.
    fn agrees(p: &str, lit: &str, lines: &[&[u8]]) -> usize {
        let split = Split::new(&parse(p), lit.as_bytes())
            .unwrap_or_else(|| panic!("{p:?} splits at {lit:?}"));
        let re = reference(p);
        let mut hits = 0;
        for line in lines {
            let want = re.is_match(*line);
            // Without a hint, and with each position as one (only an
            // occurrence of the string is taken).
            for hint in std::iter::once(None).chain((0..=line.len() + 1).map(Some)) {
                assert_eq!(
                    split.is_match(line, hint),
                    Some(want),
                    "{p:?} on {:?}, hint {hint:?}",
                    String::from_utf8_lossy(line)
                );
            }
            hits += usize::from(want);
        }
        hits
    }

    #[test]
    fn split_matches_exactly_where_the_regex_does() {
        let lines: &[&[u8]] = &[
            b"",
            b"Failed",
            b"x sshd[12]: Failed password for root from 1.2.3.4 port 22",
            b"x sshd[12]: Failed to release session",
            b"sshd[]: Failed password for root from 1.2.3.4 port 22",
            b"sshd[1]: Failed password for  from 1.2.3.4 port 22",
            b"Failed sshd[1]: Failed password for a from 1.2.3.4 port 9",
            b"sshd[1]: Failed password for a from 1.2.3 port 9 Failed",
        ];
        let p = r"sshd\[\d+\]: Failed (?:password|publickey) for \S+ from (?:\d{1,3}\.){3}\d{1,3} port \d+";
        assert_eq!(agrees(p, "Failed", lines), 2);
    }

    #[test]
    fn anchors_and_boundaries_see_the_whole_line() {
        let lines: &[&[u8]] = &[
            b"1.2.3.4 - - [x] \"GET / HTTP/1.1\" 404 12",
            b"1.2.3.4 - - [x] \"GET / HTTP/1.1\" 200 12",
            b" 1.2.3.4 - - [x] \"GET / HTTP/1.1\" 404 12",
            b"HTTP/1.1\" 404 1",
        ];
        let p =
            r#"^(?:\d{1,3}\.){3}\d{1,3} - \S+ \[[^\]]+\] "[A-Z]+ [^"]* HTTP/\d\.\d" [45]\d\d \d+"#;
        assert_eq!(agrees(p, "HTTP", lines), 1);
        let words: &[&[u8]] = &[b"a user x", b"auser x", b"a users", b"user", b"a user"];
        assert_eq!(agrees(r"\buser\b", "user", words), 3);
        let ends: &[&[u8]] = &[b"code 42 done", b"code 42 done!", b"done", b"1 done"];
        assert_eq!(agrees(r"\d+ done$", "done", ends), 2);
    }

    #[test]
    fn a_later_or_overlapping_occurrence_can_be_the_match() {
        // Only the second "aa" is preceded by "x"; and "aaa" holds two
        // overlapping ones.
        let lines: &[&[u8]] = &[b"aa xaab", b"aab", b"xaaab", b"xaa", b"aaxaa b"];
        assert_eq!(agrees(r"xaab", "aa", lines), 1);
        assert_eq!(agrees(r"x\w*aab", "aa", lines), 2);
    }

    #[test]
    fn the_string_may_be_trimmed_from_a_longer_literal() {
        // The prefilter's string drops the punctuation around "Invalid user".
        let p = r"sshd\[\d+\]: Invalid user \S* from \d+";
        let lines: &[&[u8]] = &[
            b"sshd[1]: Invalid user  from 9",
            b"sshd[1]:Invalid user x from 9",
            b"sshd[1]: Invalid user x from",
        ];
        assert_eq!(agrees(p, "Invalid user", lines), 1);
    }

    #[test]
    fn no_split_without_a_top_level_literal() {
        assert!(Split::new(&parse(r"(?:foo|bar)\d+"), b"foo").is_none());
        assert!(Split::new(&parse(r"(?:foobar)+"), b"foobar").is_none());
        assert!(Split::new(&parse(r"abc"), b"").is_none());
    }
}
