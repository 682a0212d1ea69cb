#!/usr/bin/env bash
# The long, coverage-guided fuzzing run (cargo-fuzz + libFuzzer, nightly Rust, AddressSanitizer,
# debug assertions and overflow checks on). The test suite's short run of the same targets is
# crates/ndflow-fuzz/tests/smoke.rs (stable, seeded mutations).
#
#   scripts/fuzz.sh                       # every target, 10^7 executions each
#   scripts/fuzz.sh ca_server pva_server  # only these
#   scripts/fuzz.sh -n 1000000 -T 600     # 10^6 executions or 10 minutes, whichever first
#   scripts/fuzz.sh -c -T 3600 pva_client # an hour more of a campaign to 10^7 (see -c)
#   scripts/fuzz.sh -L                    # where each target's campaign stands
#   scripts/fuzz.sh -s none -c pva_wire   # without AddressSanitizer (see -s)
#
# Options: -n RUNS (libFuzzer -runs, default 10000000), -T SECONDS (-max_total_time per target,
# default 0 = no limit), -t SECONDS (-timeout per input, default 10), -m MB (-rss_limit_mb,
# default 2048), -o FILE (the report, default fuzz/target/fuzz-report.md), -N NICE (default 10),
# -B (do not build: run the binaries already in fuzz/target), -c (continue a campaign: each
# target runs only the executions its ledger still lacks, see below), -L (print each target's
# campaign from the ledger, run nothing), -s SANITIZER (address, the default, or none: see
# below). ASAN_OPTIONS, when set, replaces the default below.
#
# Installs the nightly toolchain and cargo-fuzz when missing. Targets run one at a time (one
# libFuzzer process: the machine stays usable). Each one starts from the committed seeds
# (fuzz/corpus/<target>/, read only) plus its working corpus from earlier runs
# (fuzz/target/corpus/<target>/, where new inputs go); crashes land in fuzz/artifacts/<target>/.
# The report has one row per target: executions, executions/s, coverage (libFuzzer's cov:
# edges and ft: features at the end), corpus size, crashes, and the campaign's executions;
# the exit status is 1 if any target crashed (or failed to run).
#
# Campaigns: every run appends a row to fuzz/target/ledger.tsv (date, target, executions,
# seconds, crashed, commit, sanitizer). A target's campaign is its runs since its last crash, each
# starting from the corpus the previous one grew, so a 10-hour target can be fuzzed an hour at
# a time (what libFuzzer's own -fork mode does with its jobs). With -c a target runs
# RUNS minus its campaign's executions, and is skipped once the campaign has RUNS.
#
# -s none: a build without AddressSanitizer (fuzz/target/nosan), allowed only for the targets
# in NO_SANITIZER below, whose own code path runs no unsafe block (ndflow-ca and the GenICam
# XML parser have none; ndflow-pva's two are socket calls, which the targets do not make).
# pva_client's frames go into ndflow-core's pool buffers (unsafe inside), through the same
# Pool::alloc that eiger_stream and tiff_read, AddressSanitizer-only, fuzz with any size;
# what is pva_client's own is safe code. There a failure is a panic, an overflow (debug
# assertions stay on), a hang or memory over -rss_limit_mb, which libFuzzer catches without
# ASan; what goes unseen is a leak (LeakSanitizer is part of ASan) and a memory error in a
# dependency's unsafe code. In exchange 3 to 6 times the executions/s (docs/reliability.md).
# The ledger records each run's sanitizer; a campaign counts the executions of both.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=10000000 MAX_TIME=0 TIMEOUT=10 RSS=2048 NICE=10 BUILD=1 CONTINUE=0 LIST=0
SANITIZER=address
REPORT=fuzz/target/fuzz-report.md
NO_SANITIZER=" pva_server pva_server_cmd pva_datagram pva_client pva_wire ca_server ca_server_cmd ca_datagram ca_client ca_dbr genicam_xml "
while getopts "n:T:t:m:o:N:s:BcLh" opt; do
    case $opt in
        n) RUNS=$OPTARG ;;
        T) MAX_TIME=$OPTARG ;;
        t) TIMEOUT=$OPTARG ;;
        m) RSS=$OPTARG ;;
        o) REPORT=$OPTARG ;;
        N) NICE=$OPTARG ;;
        B) BUILD=0 ;;
        c) CONTINUE=1 ;;
        L) LIST=1 ;;
        s) SANITIZER=$OPTARG ;;
        *) sed -n '2,44p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

# Every target, in the library's order (network-facing first), unless named.
if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(grep -oE '^    \("[a-z0-9_]+",' crates/ndflow-fuzz/src/lib.rs | tr -d ' (",')
fi
for t in "${targets[@]}"; do
    [ -f "fuzz/fuzz_targets/$t.rs" ] || { echo "no fuzz target $t" >&2; exit 2; }
done
case $SANITIZER in
    address) target_dir=fuzz/target ;;
    none)
        target_dir=fuzz/target/nosan
        if [ "$LIST" = 0 ]; then
            for t in "${targets[@]}"; do
                if [[ $NO_SANITIZER != *" $t "* ]]; then
                    echo "-s none: $t reaches unsafe code of ours and runs only with AddressSanitizer" \
                        "(without it:$NO_SANITIZER)" >&2
                    exit 2
                fi
            done
        fi
        ;;
    *) echo "-s $SANITIZER: the sanitizer is address or none" >&2; exit 2 ;;
esac

mkdir -p fuzz/target
ledger=fuzz/target/ledger.tsv
[ -f "$ledger" ] || printf 'date\ttarget\texecutions\tseconds\tcrashed\tcommit\tsanitizer\n' >"$ledger"
# Ledgers from before the sanitizer column: its rows ran with address.
head -1 "$ledger" | grep -q 'sanitizer$' || sed -i '1s/$/\tsanitizer/' "$ledger"
# A target's campaign (its ledger rows after its last crash): "executions runs seconds
# executions-without-sanitizer".
campaign_stats() {
    awk -F'\t' -v t="$1" '$2 == t {
            if ($5 == 1) { n = 0; r = 0; s = 0; u = 0 } else { n += $3; r++; s += $4; if ($7 == "none") u += $3 }
        }
        END { printf "%d %d %d %d\n", n, r, s, u }' "$ledger"
}
campaign() { campaign_stats "$1" | cut -d' ' -f1; }

if [ "$LIST" = 1 ]; then
    echo "| target | campaign executions | of which without ASan | runs | seconds | reached $RUNS |"
    echo "|---|---:|---:|---:|---:|---|"
    for t in "${targets[@]}"; do
        read -r n r secs u < <(campaign_stats "$t")
        echo "| $t | $n | $u | $r | $secs | $([ "$n" -ge "$RUNS" ] && echo yes || echo no) |"
    done
    exit 0
fi

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# One build of every target (release, debug assertions, AddressSanitizer unless -s none), then
# each binary runs on its own (what `cargo fuzz run` does, without a cargo invocation per
# target).
if [ "$BUILD" = 1 ]; then
    echo "building the fuzz targets (cargo +nightly fuzz build -s $SANITIZER)…"
    nice -n "$NICE" cargo +nightly fuzz build -s "$SANITIZER" --target-dir "$target_dir"
fi
bin=$target_dir/$(rustc -vV | sed -n 's/^host: //p')/release

# No stack trace recorded at each allocation: a fifth to a third of the executions/s of the
# allocation-heavy targets. A crash's input is kept; run it again with ASAN_OPTIONS= for the
# allocation stacks in its report. No fake stack frames for use-after-return either (15-40 %
# more executions/s, measured on config_toml and pva_client): only unsafe code can return a
# pointer to its own stack, and the decoders fuzzed here have none of that kind. Leak
# detection stays on: a session that leaks would be unbounded memory under hostile load.
export ASAN_OPTIONS="${ASAN_OPTIONS-malloc_context_size=0:detect_stack_use_after_return=0}"

mkdir -p fuzz/target/logs "$(dirname "$REPORT")"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
rows=()
failed=0
for t in "${targets[@]}"; do
    work=fuzz/target/corpus/$t
    log=fuzz/target/logs/$t.log
    mkdir -p "$work" "fuzz/artifacts/$t"
    runs=$RUNS
    if [ "$CONTINUE" = 1 ]; then
        done_runs=$(campaign "$t")
        runs=$(( RUNS - done_runs ))
        if [ "$runs" -le 0 ]; then
            echo "== $t: its campaign has $done_runs executions (>= $RUNS): skipped"
            rows+=("| $t | 0 | - | - | - | - | 0 | 0 | $done_runs |")
            continue
        fi
    fi
    args=(-runs="$runs" -rss_limit_mb="$RSS" -timeout="$TIMEOUT" -print_final_stats=1
          -max_total_time="$MAX_TIME" -artifact_prefix="fuzz/artifacts/$t/")
    [ -f "fuzz/dict/$t.dict" ] && args+=(-dict="fuzz/dict/$t.dict")
    echo "== $t: ${args[*]}"
    start=$(date +%s)
    set +e
    nice -n "$NICE" "$bin/$t" "${args[@]}" "$work" "fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    set -e
    secs=$(( $(date +%s) - start ))
    stat() { grep -oE "stat::$1: *[0-9]+" "$log" | tail -1 | grep -oE '[0-9]+$' || echo "?"; }
    execs=$(stat number_of_executed_units)
    if [ "$execs" = "?" ]; then
        # Stopped before its final stats: the last status line's count.
        execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
        execs=${execs:-0}
    fi
    rate=$(stat average_exec_per_sec)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo "?")
    ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo "?")
    units=$(grep -oE 'corp: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo "?")
    interrupted=0 crashed=0
    if [ "$rc" -eq 72 ]; then
        # libFuzzer's exit status when interrupted (Ctrl-C, SIGTERM): not a crash; the
        # executions so far still count, and the remaining targets do not start.
        interrupted=1
        crashes="0 (interrupted)"
    elif [ "$rc" -ne 0 ]; then
        failed=1 crashed=1
        crash=$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -1 | sed 's/Test unit written to //')
        crashes="yes (exit $rc${crash:+: $crash})"
    else
        crashes=0
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u '+%Y-%m-%dT%H:%MZ')" "$t" "$execs" "$secs" \
        "$crashed" "$commit" "$SANITIZER" >>"$ledger"
    row="| $t | $execs | $rate | $cov | $ft | $units | $secs | $crashes | $(campaign "$t") |"
    echo "$row"
    rows+=("$row")
    [ "$interrupted" = 1 ] && break
done

{
    echo "Fuzzing run of $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname) ($(nproc) cores), runs=$RUNS, max_total_time=$MAX_TIME s per target, sanitizer: $SANITIZER"
    echo
    echo "| target | executions | exec/s | cov | ft | corpus | seconds | crashes | campaign |"
    echo "|---|---:|---:|---:|---:|---:|---:|---|---:|"
    printf '%s\n' "${rows[@]}"
} | tee "$REPORT"
echo "report: $REPORT; logs: fuzz/target/logs/; ledger: $ledger"
exit $failed
