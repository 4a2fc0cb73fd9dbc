#!/usr/bin/env bash
# The reservation real tasks converge to, beside their usage (issue #16).
# A local cell (herd up, one agent, the master's reclamation at the given
# preset with a 60 s startup, usage rows every 5 s) runs four production
# tasks whose usage differs in shape:
#   web       herd bench ls-server (500 us of CPU a request), driven by wrk
#             at a rate that steps: 100 req/s, then 600, then 150 (a third
#             of the run each)
#   cruncher  stress-ng --cpu 1 --cpu-load 30: a steady 30% of a core
#   growing   stress-ng --vm 1 --vm-hang: holds 200 MiB of its 512 MiB
#   idle      sleep
# Every 5 s it records each task's reservation (herd status --json); at the
# end, the usage rows of the cell's history (herd query). Writes to OUT:
#   usage.csv         the profiles `herd sim reclamation --usage` reads
#   reservation.csv   time_s, task, cpu usage, cpu reservation, memory usage,
#                     memory reservation (the nearest usage row)
#   reservation.svg   the web task's CPU: limit, usage and reservation
# and prints RESULT lines: each task's final CPU reservation and its mean
# usage over the last minute.
#
#   bench/reservation_trace.sh [--herd PATH] [--minutes 15] [--preset aggressive] [--out DIR]
# Needs wrk, stress-ng and jq (scripts/setup.sh installs them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
herd=$root/build/bin/herd
minutes=15
preset=aggressive
out=$root/build/reservation-trace
while [ $# -gt 0 ]; do
  case "$1" in
    --herd) herd=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --preset) preset=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in wrk stress-ng jq; do
  command -v "$tool" >/dev/null || { echo "reservation_trace: $tool not found (scripts/setup.sh)" >&2; exit 2; }
done
case "$minutes" in '' | *[!0-9]*) echo "--minutes: a whole number" >&2; exit 2 ;; esac
[ "$minutes" -ge 3 ] && [ "$minutes" -le 240 ] || { echo "--minutes: 3..240" >&2; exit 2; }
mkdir -p "$out"
dir=$(mktemp -d /tmp/herd-reservation-XXXXXX)
chmod 755 "$dir"
cleanup() {
  [ -n "${wrk_pid:-}" ] && kill "$wrk_pid" 2>/dev/null || true
  "$herd" down --data "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
"$herd" up --detach --data "$dir" --listen 127.0.0.1:0 --agents 1 --dns "" --history-sample 5s \
  --reclaim "$preset" --master-arg=--reclaim-startup=60s >/dev/null
master=$(cat "$dir/master/master.addr")
h=("$herd" --master "$master" --credentials "$dir/credentials.pem")

job() {  # job NAME CPU MEMORY COMMAND-JSON [EXTRA-YAML]
  printf 'name: %s\nuser: trace\npriority: production\ntasks: 1\ncommand: %s\nresources: {cpu: %s, memory: %s%s}\nrestart: {policy: always}\n' \
    "$1" "$4" "$2" "$3" "${5:-}" > "$dir/$1.yaml"
  "${h[@]}" submit "$dir/$1.yaml" >/dev/null
}
job web 700m 256Mi "[\"$herd\", bench, ls-server, --port, \"\${port.http}\"]" ", ports: [http]"
job cruncher 500m 128Mi '[stress-ng, --cpu, "1", --cpu-load, "30", --timeout, 4h, --quiet]'
job growing 400m 512Mi '[stress-ng, --vm, "1", --vm-bytes, 200M, --vm-hang, "0", --timeout, 4h, --quiet]'
job idle 100m 64Mi '[sleep, "14400"]'

port=
for _ in $(seq 600); do
  port=$("${h[@]}" status trace/web --json | jq -r '.tasks[0].ports.http // empty')
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/" >/dev/null 2>&1 && break
  port=
  sleep 0.1
done
[ -n "$port" ] || { echo "reservation_trace: the web task did not come up" >&2; exit 1; }

# wrk at a fixed pace per connection (4 connections).
pace() {  # pace RATE SECONDS
  printf 'local interval = %s\nfunction delay() return interval end\n' "$(awk -v r="$1" 'BEGIN{print 4000/r}')" > "$dir/pace.lua"
  wrk -t 1 -c 4 -d "${2}s" -s "$dir/pace.lua" "http://127.0.0.1:$port/" >/dev/null 2>&1
}
phase=$((minutes * 60 / 3))
( pace 100 "$phase"; pace 600 "$phase"; pace 150 "$phase" ) &
wrk_pid=$!

start=$(date +%s)
res="$dir/reservations.csv"
: > "$res"
while kill -0 "$wrk_pid" 2>/dev/null; do
  t=$(( $(date +%s) - start ))
  for j in web cruncher growing idle; do
    "${h[@]}" status "trace/$j" --json |
      jq -r --arg t "$t" --arg j "$j" \
        '.tasks[0] | [$t, $j, (.resources.cpuMillis // .resources.cpu_millis // 0), (.resources.memoryBytes // .resources.memory_bytes // 0), (.reservation.cpuMillis // .reservation.cpu_millis // .resources.cpuMillis // .resources.cpu_millis // 0), (.reservation.memoryBytes // .reservation.memory_bytes // .resources.memoryBytes // .resources.memory_bytes // 0)] | @csv' \
      >> "$res" || true
  done
  sleep 5  # the sampling period of this recording, not a wait for an event
done
wrk_pid=

# Usage rows of the history (5 s periods), with the limits.
"${h[@]}" query --max-rows 100000 --json \
  "select time_ms, job, task_index, cpu_millis, memory_bytes from usage where user = 'trace' order by time_ms" |
  jq -r '.rows[] | [.values[] | (.integer // .real // .text // "")] | @csv' | tr -d '"' > "$dir/usage_rows.csv"
limits() {  # limits JOB -> "cpu_millis memory_bytes"
  grep "^\"[0-9]*\",\"$1\"," "$res" | tail -1 | tr -d '"' | awk -F, '{print $3, $4}'
}
{
  echo "time_ms,job,task_index,cpu_millis,memory_bytes,cpu_limit_millis,memory_limit_bytes"
  for j in web cruncher growing idle; do
    read -r cl ml < <(limits "$j")
    awk -F, -v j="trace/$j" -v cl="$cl" -v ml="$ml" '$2 == j { printf "%s,%s,%s,%s,%s,%s,%s\n", $1, $2, $3, $4, $5, cl, ml }' \
      "$dir/usage_rows.csv"
  done
} > "$out/usage.csv"

# reservation.csv: each reservation sample beside the usage row nearest in time.
t0=$(awk -F, 'NR == 2 { print $1; exit }' "$out/usage.csv")
{
  echo "time_s,task,cpu_usage_millis,cpu_reservation_millis,memory_usage_bytes,memory_reservation_bytes,cpu_limit_millis"
  tr -d '"' < "$res" | while IFS=, read -r t j cl ml rc rm; do
    u=$(awk -F, -v j="trace/$j" -v at="$(( (start + t) * 1000 ))" \
      'NR > 1 && $2 == j { d = $1 - at; if (d < 0) d = -d; if (best == "" || d < best) { best = d; c = $4; m = $5 } } END { print c "," m }' \
      "$out/usage.csv")
    echo "$t,$j,${u%,*},$rc,${u#*,},$rm,$cl"
  done
} > "$out/reservation.csv"

# The web task's CPU as an SVG chart (limit, usage, reservation over time).
awk -F, -v minutes="$minutes" '
  NR > 1 && $2 == "web" && $3 != "" { n++; t[n] = $1; u[n] = $3; r[n] = $4; l = $7 }
  END {
    W = 720; H = 300; L = 60; B = 40; T = 30; R = 20
    xmax = minutes * 60; ymax = l * 1.1
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H
    printf "<text x=\"%d\" y=\"18\">Reservation of a real task (web: herd bench ls-server under wrk) and its CPU usage</text>\n", L
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, H - B, W - R, H - B
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, T, L, H - B
    for (k = 0; k <= 4; k++) { y = H - B - k * (H - B - T) / 4; printf "<text x=\"5\" y=\"%d\">%dm</text>\n", y + 4, ymax * k / 4 }
    for (k = 0; k <= 5; k++) { x = L + k * (W - L - R) / 5; printf "<text x=\"%d\" y=\"%d\">%ds</text>\n", x - 10, H - B + 16, xmax * k / 5 }
    split("limit usage reservation", names, " "); split("#999999 #1f77b4 #d62728", colors, " ")
    for (s = 1; s <= 3; s++) {
      printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", colors[s]
      for (i = 1; i <= n; i++) {
        v = (s == 1 ? l : (s == 2 ? u[i] : r[i]))
        printf "%.1f,%.1f ", L + t[i] * (W - L - R) / xmax, H - B - v * (H - B - T) / ymax
      }
      printf "\"/>\n<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n", W - 200 + (s - 1) * 65, H - 8, colors[s], names[s]
    }
    printf "</svg>\n"
  }' "$out/reservation.csv" > "$out/reservation.svg"

for j in web cruncher growing idle; do
  last=$(grep ",$j," "$out/reservation.csv" | tail -1)
  used=$(grep ",$j," "$out/reservation.csv" | tail -12 | awk -F, '{ s += $3; n++ } END { if (n) printf "%.0f", s / n }')
  echo "RESULT ${j}_cpu_reservation_millis=$(echo "$last" | cut -d, -f4)"
  echo "RESULT ${j}_cpu_usage_last_minute_millis=${used:-0}"
  echo "RESULT ${j}_memory_reservation_bytes=$(echo "$last" | cut -d, -f6)"
done
echo "wrote $out/usage.csv, $out/reservation.csv, $out/reservation.svg"
