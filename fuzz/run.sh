#!/usr/bin/env bash
# Runs every fuzz target (or those named) under AFL++ for SECONDS each:
#
#   fuzz/run.sh SECONDS [TARGET...]
#
# Prints per target the executions, the corpus size and the findings
# (crashes: a panic, i.e. a broken invariant; hangs), and exits non-zero
# if any target found something. Findings are left in
# $OUT/TARGET/default/{crashes,hangs} (OUT is printed); replay one with
#   cargo run -p enso-fuzz --bin enso-fuzz-replay -- TARGET FILE
# and keep it as a regression test (see fuzz/README.md).
set -euo pipefail

if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ]; then
    echo "usage: fuzz/run.sh SECONDS [TARGET...]  (targets: frames steering pcap kv engine memif)" >&2
    exit 2
fi
secs=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frames steering pcap kv engine memif)
for t in "${targets[@]}"; do
    if [ ! -d "$here/corpus/$t" ]; then
        echo "unknown target $t (no seed corpus $here/corpus/$t)" >&2
        exit 2
    fi
done

if ! cargo afl --version >/dev/null 2>&1; then
    echo "cargo-afl is not installed; installing it: cargo install cargo-afl --locked" >&2
    echo "(it builds AFL++ from the source bundled in the crate: needs a C compiler and make)" >&2
    cargo install cargo-afl --locked
fi
# AFL++ itself and its runtime for this rustc, built once per toolchain.
if ! out=$(cargo afl config --build 2>&1); then
    if ! grep -q "already built" <<<"$out"; then
        echo "$out" >&2
        echo "cargo afl config --build failed: AFL++ could not be built" >&2
        exit 1
    fi
fi

base=${CARGO_TARGET_DIR:-$root/target}
# Instrumented code gets its own target directory, so that it never
# replaces the ordinary build's artifacts (and the other way round).
afl_target="$base/afl"
echo "building the instrumented harness (cargo afl build) into $afl_target"
(
    cd "$root"
    # Thin LTO over instrumented code costs minutes per build and buys a
    # fuzzer nothing.
    CARGO_TARGET_DIR="$afl_target" CARGO_PROFILE_RELEASE_LTO=false \
        CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
        cargo afl build --release -p enso-fuzz --features afl --bin enso-fuzz-afl
)
bin="$afl_target/release/enso-fuzz-afl"

out_root="$base/fuzz-out"
devices=$(mktemp -d "${TMPDIR:-/tmp}/enso-fuzz.XXXXXX")
trap 'rm -rf "$devices"' EXIT
echo "fuzzing ${targets[*]} for ${secs}s each; output in $out_root"

# This machine's CPU frequency governor and core dump setting are left as
# they are: AFL++ is told not to insist on them. No CPU binding either (the
# cores are shared).
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1
export AFL_NO_UI=1 ENSO_FUZZ_DIR="$devices"

status=0
summary=()
for t in "${targets[@]}"; do
    out="$out_root/$t"
    rm -rf "$out"
    mkdir -p "$out"
    log="$out/afl.log"
    echo "== $t"
    # -t: a run over 2 s is a hang (each input is bounded far below that).
    if ! cargo afl fuzz -V "$secs" -t 2000 -i "$here/corpus/$t" -o "$out" -- "$bin" "$t" \
        >"$log" 2>&1; then
        echo "afl-fuzz failed for $t; its output ($log) ends:" >&2
        tail -20 "$log" >&2
        status=1
        summary+=("$t: afl-fuzz failed")
        continue
    fi
    stats="$out/default/fuzzer_stats"
    get() { awk -F: -v k="$1" '$1 ~ "^"k" *$" {gsub(/ /, "", $2); print $2}' "$stats"; }
    execs=$(get execs_done)
    corpus=$(get corpus_count)
    crashes=$(get saved_crashes)
    hangs=$(get saved_hangs)
    line="$t: $execs executions, corpus $corpus, findings: $crashes crashes, $hangs hangs"
    echo "$line"
    summary+=("$line")
    if [ "${crashes:-0}" != 0 ] || [ "${hangs:-0}" != 0 ]; then
        echo "  findings in $out/default/crashes and $out/default/hangs" >&2
        status=1
    fi
done
echo "== summary"
printf '%s\n' "${summary[@]}"
exit $status
