#!/usr/bin/env bash
# End-to-end performance of burstsim on this machine: requests per second and
# peak memory for scenarios/bench-100m.toml (10^8 Poisson requests) through
# each limiter kind, the same at 10^9 requests for memory, 10^8 requests over
# 10^6 client keys with a limiter per key, and the speed-up of a
# replication-heavy run from one core to all.
#
# With ../shared/perf-floor present, first the ratios to that hand-written
# yardstick, each the median of three back-to-back pairs (eleven for the
# log's four lines of the issue's targets): the open loop, per-key
# limits (10^4 and 10^6 keys, with and without the figures per key) and an
# access log's replay (on one core and on all, with and without the figures
# per key; spread within its seconds, as by default; gzipped, against zcat's
# own time; the same requests as JSON lines); then one run on one core
# against the same run on all, the median of seven alternating pairs, on a
# quiet machine and with a neighbour spinning on
# the last core (this machine's speed drifts from minute to minute: only pairs
# compare). BURSTSIM_BASELINE=path/to/burstsim
# also runs the closed loop with that (earlier) binary, in the same minute.
#
#   scripts/bench.sh            # everything (about ten minutes on 2 cores)
#   scripts/bench.sh quick      # only 10^8 through the fixed window
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/burstsim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One scenario per limiter kind: bench-100m.toml with its [[limiter]] replaced.
limiter() {
  case "$1" in
    fixed-window) printf 'kind = "fixed-window"\nwindow = "1s"\nthreshold = 500000\n' ;;
    smaller-window) printf 'kind = "smaller-window"\nwindow = "1s"\nthreshold = 500000\nsplits = 10\n' ;;
    buffered) printf 'kind = "buffered"\nwindow = "1s"\ncapacity = 700000\n' ;;
    sliding-log) printf 'kind = "sliding-log"\nwindow = "1s"\nthreshold = 500000\n' ;;
    sliding-counter) printf 'kind = "sliding-counter"\nwindow = "1s"\nthreshold = 500000\n' ;;
    token-bucket) printf 'kind = "token-bucket"\nrate = 500000\nburst = 1000\n' ;;
    chain) printf 'kind = "chain"\nlayers = [{ kind = "fixed-window", window = "1s", threshold = 500000 }, { kind = "token-bucket", rate = 600000, burst = 1000 }]\n' ;;
  esac
}

scenario() { # kind duration -> path
  local path="$tmp/$1-$2.toml"
  sed -e '/^\[\[limiter\]\]/,$d' -e "s/^duration = .*/duration = \"$2\"/" scenarios/bench-100m.toml > "$path"
  printf '[[limiter]]\nname = "%s"\n' "$1" >> "$path"
  limiter "$1" >> "$path"
  echo "$path"
}

secs() { # command… -> seconds of wall time
  local start end
  start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

run() { # label path
  local line
  line=$("$bin" run "$2" --no-charts --quiet --stats --out "$tmp/out" 2>&1 >/dev/null)
  printf '%-22s %s\n' "$1" "${line#simulated }"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"

# The yardstick: ../shared/perf-floor does the hot path's work by hand.
# Each ratio is burstsim's time over the floor's, measured back to back.
floor_dir=../shared/perf-floor
if [ -f "$floor_dir/Cargo.toml" ]; then
  CARGO_TARGET_DIR=target/perf-floor cargo build --release --quiet --locked --manifest-path "$floor_dir/Cargo.toml"
  floor=target/perf-floor/release/floor
  same_work() { # kind -> the floor's same-work scenario with that limiter
    local path="$tmp/same-work-$1.toml"
    sed -e '/^\[\[limiter\]\]/,$d' "$floor_dir/same-work.toml" > "$path"
    case "$1" in
      fixed) printf '[[limiter]]\nname = "fixed"\nkind = "fixed-window"\nwindow = "1ms"\nthreshold = 500\n' ;;
      sliding) printf '[[limiter]]\nname = "sliding"\nkind = "sliding-log"\nwindow = "1ms"\nthreshold = 500\n' ;;
      token) printf '[[limiter]]\nname = "token"\nkind = "token-bucket"\nrate = 500000\nburst = 500\n' ;;
    esac >> "$path"
    echo "$path"
  }
  # Each pair runs the floor, then burstsim, back to back; the pair with the
  # median ratio of three (of $count, when set: the log's runs take a fifth
  # of a second, and three such pairs moved by a tenth from run to run) is
  # printed, with the lowest and highest ratio of more than three (the
  # machine's speed drifts: only pairs compare).
  pairs() { # label floor-command burstsim-command (each a string, run by sh)
    local f b pairs="" n=${count:-3} sorted
    for _ in $(seq "$n"); do
      f=$(secs sh -c "$2")
      b=$(secs sh -c "$3")
      pairs+="$(echo "$b / $f" | bc -l) $b $f"$'\n'
    done
    sorted=$(sort -n <<< "${pairs%$'\n'}")
    read -r r b f < <(sed -n "$(((n + 1) / 2))p" <<< "$sorted")
    printf '%-30s burstsim %6.2f s, floor %5.2f s: %5.2fx' "$1" "$b" "$f" "$r"
    if [ "$n" -gt 3 ]; then
      printf ' (%d pairs, %.2f-%.2fx)' "$n" "$(head -n1 <<< "$sorted" | cut -d' ' -f1)" \
        "$(tail -n1 <<< "$sorted" | cut -d' ' -f1)"
    fi
    printf '\n'
  }
  ratio() { # label floor-kind burstsim-scenario
    pairs "$1" "$floor $2 1e8 small fast 1024" "$bin run $3 --no-charts --quiet --out $tmp/floor-out"
  }
  echo "yardstick (../shared/perf-floor; burstsim's time over the floor's, the median of 3 back-to-back pairs unless counted):"
  ratio "same work, fixed" fixed "$(same_work fixed)"
  ratio "default metrics" fixed scenarios/bench-100m.toml
  if [ "${1:-}" != quick ]; then
    ratio "same work, sliding" sliding "$(same_work sliding)"
    ratio "same work, token" token "$(same_work token)"
    # Per-key limits: the floor's same-work scenarios, and the same without
    # the figures per key (the floor keeps none).
    for keys in 10k 1m; do
      file=$floor_dir/same-work-perkey.toml; n=1e6
      [ $keys = 10k ] && { file=$floor_dir/same-work-perkey-10k.toml; n=1e4; }
      sed "s/^bucket = .*/&\nper_key = false/" "$file" > "$tmp/perkey-$keys-off.toml"
      pairs "per key, $keys keys, figures" "$floor perkey 1e8 $n" "$bin run $file --no-charts --quiet --out $tmp/pk"
      pairs "per key, $keys keys, no figures" "$floor perkey 1e8 $n" "$bin run $tmp/perkey-$keys-off.toml --no-charts --quiet --out $tmp/pk"
    done
    # A 2*10^6-line combined log (257 MB), written by the floor's script next
    # to a copy of its scenario; on one core, then on two.
    python3 "$floor_dir/gen-log.py" "$tmp/access-2m.log" >/dev/null
    cp "$floor_dir/same-work-log.toml" "$tmp/same-work-log.toml"
    log_run="$bin run $tmp/same-work-log.toml --no-charts --quiet --out $tmp/log"
    count=11 pairs "log replay, one core" "taskset -c 0 $floor log $tmp/access-2m.log" "taskset -c 0 $log_run"
    count=11 pairs "log replay, all cores" "$floor log $tmp/access-2m.log" "$log_run"
    # The same without the figures per key, which the floor does not keep.
    sed "s/^bucket = .*/&\nper_key = false/" "$tmp/same-work-log.toml" > "$tmp/same-work-log-off.toml"
    log_off="$bin run $tmp/same-work-log-off.toml --no-charts --quiet --out $tmp/log-off"
    count=11 pairs "log, one core, no figures" "taskset -c 0 $floor log $tmp/access-2m.log" "taskset -c 0 $log_off"
    count=11 pairs "log, all cores, no figures" "$floor log $tmp/access-2m.log" "$log_off"
    # The same spread within each second, as a whole-second log is by
    # default: more work than the floor's, what a user's run costs.
    sed 's/, spread = "none"//' "$tmp/same-work-log.toml" > "$tmp/same-work-log-spread.toml"
    pairs "log, one core, spread" "taskset -c 0 $floor log $tmp/access-2m.log" \
      "taskset -c 0 $bin run $tmp/same-work-log-spread.toml --no-charts --quiet --out $tmp/log-spread"
    # The same requests as JSON lines (Traefik's and Envoy's layout: RFC 3339
    # times, eight members, 1.5 times the bytes), against the floor on the
    # combined log: not the same bytes, so more than the same work.
    python3 - "$tmp/access-2m.log" "$tmp/access-2m.jsonl" <<'PY'
import datetime, json, re, sys
line = re.compile(r'(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) \S+" (\d+) (\d+) "([^"]*)" "([^"]*)"')
times = {}
with open(sys.argv[1]) as src, open(sys.argv[2], "w") as out:
    for text in src:
        addr, at, method, path, status, size, referer, agent = line.match(text).groups()
        if at not in times:
            when = datetime.datetime.strptime(at, "%d/%b/%Y:%H:%M:%S %z")
            times[at] = when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        out.write(json.dumps({"time": times[at], "remote_addr": addr, "method": method, "path": path,
                              "status": int(status), "bytes": int(size), "referer": referer,
                              "user_agent": agent}, separators=(",", ":")) + "\n")
PY
    sed 's/format = "combined", path = "access-2m\.log"/format = "jsonl", path = "access-2m.jsonl"/' \
      "$tmp/same-work-log.toml" > "$tmp/same-work-jsonl.toml"
    pairs "JSON lines, one core" "taskset -c 0 $floor log $tmp/access-2m.log" \
      "taskset -c 0 $bin run $tmp/same-work-jsonl.toml --no-charts --quiet --out $tmp/jsonl"
    # The same log gzipped, against zcat's own time to read it.
    gzip -c "$tmp/access-2m.log" > "$tmp/access-2m.log.gz"
    sed 's/access-2m\.log"/access-2m.log.gz"/' "$tmp/same-work-log.toml" > "$tmp/same-work-log-gz.toml"
    pairs "gzipped log, against zcat" "zcat $tmp/access-2m.log.gz > /dev/null" \
      "$bin run $tmp/same-work-log-gz.toml --no-charts --quiet --out $tmp/log-gz"
  fi
fi
if command -v taskset >/dev/null && [ "$(nproc)" -gt 1 ]; then
  one_vs_all() { # label, scenario (default bench-100m), then 7 alternating pairs of one core against all
    local ratios=() one all scenario=${2:-scenarios/bench-100m.toml}
    for _ in 1 2 3 4 5 6 7; do
      one=$(secs taskset -c 0 "$bin" run "$scenario" --no-charts --quiet --out "$tmp/one")
      all=$(secs "$bin" run "$scenario" --no-charts --quiet --out "$tmp/all")
      ratios+=("$(echo "$one / $all" | bc -l)")
    done
    printf '%-30s %.2fx median (one core / all; above 1: all is faster; pairs: %s)\n' "$1" \
      "$(printf '%s\n' "${ratios[@]}" | median)" "$(printf '%.2f ' "${ratios[@]}")"
  }
  echo "one run on all cores against one core (bench-100m unless named, 7 alternating pairs):"
  one_vs_all "quiet machine"
  if [ "${1:-}" != quick ]; then
    # A neighbour spinning on the last core for the length of the pairs.
    taskset -c "$(($(nproc) - 1))" sh -c 'while :; do :; done' &
    spinner=$!
    one_vs_all "busy neighbour on core $(($(nproc) - 1))"
    # The real-data path too: the yardstick's log (its check and replay
    # each run two threads when two cores are free).
    if [ -f "$tmp/same-work-log.toml" ]; then
      one_vs_all "log, busy neighbour" "$tmp/same-work-log.toml"
    fi
    kill "$spinner"
  fi
fi
kinds=(fixed-window smaller-window buffered sliding-log sliding-counter token-bucket chain)
[ "${1:-}" = quick ] && kinds=(fixed-window)
echo "10^8 requests (Poisson, 10^6/s for 100 s), one limiter, default metrics, no charts:"
for kind in "${kinds[@]}"; do run "$kind" "$(scenario "$kind" 100s)"; done
[ "${1:-}" = quick ] && exit 0
echo "10^9 requests (1000 s), fixed window, for memory:"
run fixed-window "$(scenario fixed-window 1000s)"
echo "10^8 requests over 10^6 client keys (uniform), fixed window of 10/s per key:"
sed -e '/^\[\[workload\]\]/,$d' scenarios/bench-100m.toml > "$tmp/keys.toml"
printf '[[workload]]\nname = "api"\nsources = [{ kind = "poisson", rate = 1000000, clients = { count = 1000000 } }]\n[[limiter]]\nname = "per-key"\nkind = "fixed-window"\nwindow = "1s"\nthreshold = 10\nper = "key"\n' >> "$tmp/keys.toml"
run "per-key, 10^6 keys" "$tmp/keys.toml"
echo "10^7 first attempts (Poisson, 10^5/s for 100 s) of clients honouring a fixed window's reset hint:"
sed -e '/^\[\[workload\]\]/,$d' scenarios/bench-100m.toml > "$tmp/retry.toml"
printf '[[workload]]\nname = "herd"\nsources = [{ kind = "poisson", rate = 100000 }]\nretry = { policy = "honour-hint", max_attempts = 5 }\n[[limiter]]\nname = "fixed-window"\nkind = "fixed-window"\nwindow = "1s"\nthreshold = 80000\n' >> "$tmp/retry.toml"
run "closed loop" "$tmp/retry.toml"
if [ -n "${BURSTSIM_BASELINE:-}" ]; then
  line=$("$BURSTSIM_BASELINE" run "$tmp/retry.toml" --no-charts --quiet --stats --out "$tmp/out" 2>&1 >/dev/null)
  printf '%-22s %s\n' "closed loop, baseline" "${line#simulated }"
fi
echo "trace replay: 10^7 rows of time_ns CSV (about 1000 s of traffic), fixed window:"
awk 'BEGIN { print "time_ns"; srand(1); t = 0; for (i = 0; i < 10000000; i++) { t += int(rand() * 200000); printf "%.0f\n", t } }' > "$tmp/trace.csv"
printf 'name = "trace"\nduration = "1001s"\n[[workload]]\nname = "log"\nsources = [{ kind = "trace", path = "trace.csv" }]\n[[limiter]]\nname = "fixed-window"\nkind = "fixed-window"\nwindow = "1s"\nthreshold = 5000\n' > "$tmp/trace.toml"
start=$(date +%s.%N)
run "read + replay" "$tmp/trace.toml"
end=$(date +%s.%N)
printf '%-22s %.1f M rows/s end to end (the file is read once: checked when loaded, its rows kept for the replay)\n' "" "$(echo "10 / ($end - $start)" | bc -l)"
echo "replication-heavy: scenarios/promo.toml --replications 1000 --no-charts, 1 thread, then all:"
for threads in 1 "$(nproc)"; do
  line=$(RAYON_NUM_THREADS=$threads "$bin" run scenarios/promo.toml --replications 1000 --no-charts --quiet --stats --out "$tmp/rep" 2>&1 >/dev/null)
  printf '%-22s %s\n' "$threads thread(s)" "${line#simulated }"
done
