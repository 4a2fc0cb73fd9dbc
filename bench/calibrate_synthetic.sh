#!/usr/bin/env bash
# Issue #13: how far is the synthetic workload from the Google 2011 trace?
# Prints, for each workload, per priority band the share of tasks and of the
# CPU and memory requested; quantiles (p10, p50, p90, p99) of per-task CPU and
# memory requests as a share of the largest machine (the 2011 trace's
# normalisation); tasks per job; the CPU:memory ratio of each task (both as
# shares of the largest machine: 1 = 48 cores per 192 GiB = 4 GiB per core);
# the share of non-prod tasks asking under 0.1 core (Borg §3.2). Every figure
# is also a line `RESULT <workload>.<name>=<value>`; a side-by-side table ends
# the output. docs/sim/calibration.md reads it.
#
# Workloads (WORKLOADS; default the first four):
#   synth1250   --synthetic machines=1250,tasks=100000,fill=0.9,seed=1
#   synth12500  --synthetic machines=12500,tasks=1000000,fill=0.9,seed=1 (the default cell)
#   g2011       --google2011 $TRACES/google-2011: the tasks live at the middle
#               of our task_events part, as `herd sim` loads them (bands by
#               the loader's HerdPriority: trace 8 -> mid, 10 -> monitoring,
#               11 -> production)
#   g2011seen   every task with a row in our task_events part, its last known
#               request and priority, read with awk straight from the CSV (a
#               cross-check of the loader, and the arrivals rather than a
#               snapshot)
#   NAME=SPEC   any other synthetic spec, e.g. x10=machines=1250,tasks=12500,fill=0.9,seed=1
# Bands: Herd's (src/base/priority.h): free 0-99, batch 100-115, mid 116-119,
# production 120-359, monitoring 360+. Tiers (`tier.*`, the 2019 trace paper's
# mapping of 2011 priorities): free 0-1, beb 2-8, production 9-10,
# monitoring 11, no mid; for the synthetic workloads tiers are the bands.
# "prod" (Borg §2.1) = Herd priority >= 120.
#
# herd has no command that dumps a loaded workload, so bench/workload_dump.cc
# does (the same SyntheticWorkload / Google2011Workload calls as `herd sim`).
# It is built with everything (target workload_dump); when $BUILD/bin has no
# workload_dump, this script compiles it against $BUILD's libraries (headers
# from this checkout: they must match what $BUILD was built from). The dump
# runs no scheduler: only the generator, the trace loader and the data count.
#
# Usage: bench/calibrate_synthetic.sh
# Environment: BUILD=build  TRACES=../shared/data/traces  WORKLOADS="synth1250 synth12500 g2011 g2011seen"
#   SYNTH_SMALL=machines=1250,tasks=100000,fill=0.9,seed=1  SYNTH_BIG=machines=12500,tasks=1000000,fill=0.9,seed=1
#   GOOGLE_AT=   (seconds; default the middle of the task events)   KEEP=dir (keep the dumps there)
#   SYNTHETIC_PATCH=file   measure the generator with this patch to
#               src/sim/workload/synthetic.{h,cc} applied (compiled here, the
#               source untouched), e.g. docs/sim/calibration-proposal.diff
set -euo pipefail
if [ -n "${SYNTHETIC_PATCH:-}" ]; then SYNTHETIC_PATCH=$(realpath "$SYNTHETIC_PATCH"); fi
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
TRACES=${TRACES:-../shared/data/traces}
WORKLOADS=${WORKLOADS:-synth1250 synth12500 g2011 g2011seen}
SYNTH_SMALL=${SYNTH_SMALL:-machines=1250,tasks=100000,fill=0.9,seed=1}
SYNTH_BIG=${SYNTH_BIG:-machines=12500,tasks=1000000,fill=0.9,seed=1}
GOOGLE_AT=${GOOGLE_AT:-}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/calib.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C

# --- the dumper ------------------------------------------------------------
dumper() {
  if [ -x "$BUILD/bin/workload_dump" ] && [ -z "${SYNTHETIC_PATCH:-}" ]; then
    echo "$BUILD/bin/workload_dump"
    return
  fi
  local ninja=$BUILD/build.ninja
  [ -f "$ninja" ] || { echo "no $BUILD/bin/workload_dump and no $ninja to link one against" >&2; exit 1; }
  # sim_test links herd_sim and everything it needs; drop the test libraries.
  local libs
  libs=$(awk '/^build bin\/sim_test:/ {f=1} f && /^  LINK_LIBRARIES =/ {sub(/^  LINK_LIBRARIES = /, ""); print; exit}' "$ninja" |
    tr ' ' '\n' | grep -v -e gtest -e gmock -e '^$' |
    while read -r l; do case $l in /* | -*) echo "$l" ;; *) echo "$BUILD/$l" ;; esac; done | tr '\n' ' ')
  [ -n "$libs" ] || { echo "cannot find sim_test's libraries in $ninja" >&2; exit 1; }
  local extra=() inc=()
  if [ -n "${SYNTHETIC_PATCH:-}" ]; then
    # The generator with a patch applied (to src/sim/workload/synthetic.{h,cc}):
    # that copy and sources.cc (which builds WorkloadOptions from the header)
    # are compiled here, so the library's are not linked.
    local alt=$WORK/alt
    mkdir -p "$alt/src/sim/workload"
    cp "$ROOT"/src/sim/workload/synthetic.{h,cc} "$alt/src/sim/workload/"
    (cd "$alt" && git apply "$SYNTHETIC_PATCH") ||
      { echo "cannot apply $SYNTHETIC_PATCH to src/sim/workload/synthetic.{h,cc}" >&2; exit 1; }
    echo "compiling bench/workload_dump.cc with the generator patched by $SYNTHETIC_PATCH" >&2
    extra=("$alt/src/sim/workload/synthetic.cc" "$ROOT/src/sim/experiments/sources.cc")
    inc=(-I"$alt/src")
  else
    echo "compiling bench/workload_dump.cc against $BUILD (no workload_dump there)" >&2
  fi
  # shellcheck disable=SC2086
  c++ -std=c++20 -O2 -DFMT_SHARED -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB \
    "${inc[@]}" -I"$ROOT/src" -I"$BUILD/proto/gen" -o "$WORK/workload_dump" "$ROOT/bench/workload_dump.cc" \
    "${extra[@]}" $libs -lpthread
  echo "$WORK/workload_dump"
}

# --- the trace straight from the CSV --------------------------------------
# Every task with a row in the part: its last known cpu, memory, priority
# (normalised as in the trace); the job's task count = distinct indexes seen;
# herd priority by the loader's table (HerdPriority).
csv_dump() {
  local parts=("$TRACES"/google-2011/task_events/*.csv.gz)
  [ -f "${parts[0]}" ] || { echo "no task_events parts in $TRACES/google-2011/task_events" >&2; exit 1; }
  {
    echo "# workload	google-2011 task_events (every task seen, awk): ${#parts[@]} part(s) from $(basename "${parts[0]}")"
    echo "# largest_cpu_millis	48000"
    zcat "${parts[@]}" | awk -F, '
      BEGIN { split("0 25 100 103 106 109 112 115 116 200 360 250", hp, " ") }
      { k = $3 SUBSEP $4
        seen[k] = 1
        if ($9 != "") prio[k] = $9
        if ($10 != "") cpu[k] = $10
        if ($11 != "") mem[k] = $11 }
      END {
        for (k in seen) { split(k, a, SUBSEP); njob[a[1]]++ }
        for (k in seen) {
          if (!(k in cpu) || !(k in mem)) { unknown++; continue }
          split(k, a, SUBSEP); p = (k in prio) ? prio[k] : 0
          printf "%s\t%d\t%d\t%d\t%.9g\t%.9g\t1\n", a[1], njob[a[1]], hp[p + 1], p, cpu[k], mem[k]
        }
        printf "# unknown_requests\t%d\n", unknown
      }'
  }
}

# --- statistics of one dump -------------------------------------------------
# Writes "name value" lines. Quantiles: nearest rank over tasks (tasks per job:
# over jobs).
quantiles() {  # FILE PREFIX -> p10 p50 p90 p99 of "value weight" lines
  sort -g -k1,1 "$1" | awk -v pre="$2" '
    { v[NR] = $1; c[NR] = (NR > 1 ? c[NR - 1] : 0) + $2 }
    END {
      if (NR == 0) exit
      W = c[NR]; split("10 50 90 99", qs, " ")
      for (i = 1; i <= 4; i++) {
        t = qs[i] / 100 * W; j = 1
        while (j < NR && c[j] < t) j++
        printf "%s.p%s %.4g\n", pre, qs[i], v[j]
      }
    }'
}

stats() {  # DUMP OUT
  local d=$1 out=$2 q=$WORK/q
  mkdir -p "$q"
  awk -F'\t' -v q="$q" '
    function band(p) { return p < 100 ? "free" : p <= 115 ? "batch" : p <= 119 ? "mid" : p <= 359 ? "production" : "monitoring" }
    function tier(tp, p) {
      if (tp < 0) return band(p)
      return tp <= 1 ? "free" : tp <= 8 ? "beb" : tp <= 10 ? "production" : "monitoring"
    }
    /^# largest_cpu_millis/ { unit = $2; next }
    /^# unknown_requests/ { unknown = $2; next }
    /^#/ { next }
    {
      job = $1; njob = $2; p = $3; tp = $4; c = $5; m = $6; n = $7
      if (!(job in jobs)) { jobs[job] = njob; J++; bj[band(p)]++; tj[tier(tp, p)]++ }
      jc[job] += n * c; jm[job] += n * m
      T += n; C += n * c; M += n * m
      b = band(p); bt[b] += n; bc[b] += n * c; bm[b] += n * m
      t = tier(tp, p); tt[t] += n; tc[t] += n * c; tm[t] += n * m
      if (tp >= 0) { haveprio = 1; pt[tp] += n }
      prod = p >= 120
      print c, n > (q "/cpu"); print m, n > (q "/mem")
      print c, n > (q (prod ? "/cpu_prod" : "/cpu_nonprod")); print m, n > (q (prod ? "/mem_prod" : "/mem_nonprod"))
      if (m > 0) { print c / m, n > (q "/ratio"); print c / m, n > (q (prod ? "/ratio_prod" : "/ratio_nonprod")) }
      else zero_mem += n
      # requests are whole millicores: < 99.5 is under 0.1 core
      if (!prod) { np += n; NC += n * c; NM += n * m; if (c * unit < 99.5) tiny += n }
      if (prod) { pn += n; PC += n * c; PM += n * m }
    }
    END {
      printf "tasks %d\njobs %d\ncpu_sum %.4g\nmemory_sum %.4g\n", T, J, C, M
      split("free batch mid production monitoring", bs, " ")
      for (i = 1; i <= 5; i++) { b = bs[i]
        printf "band.%s.jobs %.4f\nband.%s.tasks %.4f\nband.%s.cpu %.4f\nband.%s.memory %.4f\n", b, bj[b] / J, b, bt[b] / T, b, bc[b] / C, b, bm[b] / M
        printf "band.%s.tasks_per_job %.4g\n", b, bj[b] ? bt[b] / bj[b] : 0 }
      split("free beb mid production monitoring", ts, " ")
      for (i = 1; i <= 5; i++) { t = ts[i]; if (t == "beb") tk = (haveprio ? "beb" : "batch"); else tk = t
        printf "tier.%s.jobs %.4f\ntier.%s.tasks %.4f\ntier.%s.cpu %.4f\ntier.%s.memory %.4f\n", t, tj[tk] / J, t, tt[tk] / T, t, tc[tk] / C, t, tm[tk] / M }
      printf "prod.tasks %.4f\nprod.cpu %.4f\nprod.memory %.4f\n", pn / T, PC / C, PM / M
      printf "cpu.mean %.4g\nmemory.mean %.4g\n", C / T, M / T
      printf "cpu_prod.mean %.4g\nmemory_prod.mean %.4g\n", pn ? PC / pn : 0, pn ? PM / pn : 0
      printf "cpu_nonprod.mean %.4g\nmemory_nonprod.mean %.4g\n", np ? NC / np : 0, np ? NM / np : 0
      printf "nonprod_under_0.1core.tasks %.4f\n", np ? tiny / np : 0
      if (haveprio) for (i = 0; i <= 11; i++) printf "trace_priority.%d.tasks %.4f\n", i, pt[i] / T
      if (zero_mem) printf "zero_memory.tasks %d\n", zero_mem
      if (unknown != "") printf "unknown_requests %d\n", unknown
      for (j in jobs) {
        print jobs[j], 1 > (q "/job"); s1 += (jobs[j] == 1); sz += jobs[j]
        print jc[j] > (q "/jobcpu"); print jm[j] > (q "/jobmem")
      }
      printf "tasks_per_job.mean %.4g\ntasks_per_job.single_task_jobs %.4f\n", sz / J, s1 / J
    }' "$d" > "$out"
  for f in cpu mem cpu_prod cpu_nonprod mem_prod mem_nonprod ratio ratio_prod ratio_nonprod; do
    local name=${f/mem/memory}
    name=${name/ratio/cpu_per_memory}
    [ -s "$q/$f" ] && quantiles "$q/$f" "$name" >> "$out"
  done
  quantiles "$q/job" tasks_per_job >> "$out"
  sort -g "$q/job" | tail -1 | awk '{ print "tasks_per_job.max", $1 }' >> "$out"
  # How much of the requests the biggest 1% of jobs hold (the 2019 paper's
  # heavy-tail figure is of usage over time, not of requests at an instant).
  local r
  for r in cpu mem; do
    sort -g -r "$q/job$r" | awk -v r="${r/mem/memory}" '
      { v[NR] = $1; s += $1 }
      END { k = int((NR + 99) / 100); for (i = 1; i <= k; i++) top += v[i]; printf "top1pct_jobs.%s %.4f\n", r, top / s }' >> "$out"
  done
  rm -rf "$q"
}

# --- run ---------------------------------------------------------------------
DUMP=
NAMES=()
for wl in $WORKLOADS; do
  name=${wl%%=*}
  NAMES+=("$name")
  case $wl in synth* | g2011 | *=*) [ -n "$DUMP" ] || DUMP=$(dumper) ;; esac
  out=$WORK/$name
  start=$(date +%s.%N)
  case $wl in
    synth1250) "$DUMP" synthetic "$SYNTH_SMALL" > "$out.tsv" ;;
    synth12500) "$DUMP" synthetic "$SYNTH_BIG" > "$out.tsv" ;;
    g2011) "$DUMP" google2011 "$TRACES/google-2011" ${GOOGLE_AT:+"$GOOGLE_AT"} > "$out.tsv" ;;
    g2011seen) csv_dump > "$out.tsv" ;;
    *=*) "$DUMP" synthetic "${wl#*=}" > "$out.tsv" ;;
    *) echo "unknown workload $wl (synth1250 synth12500 g2011 g2011seen NAME=SYNTHETIC_SPEC)" >&2; exit 2 ;;
  esac
  stats "$out.tsv" "$out.stats"
  end=$(date +%s.%N)
  echo "== $name: $(sed -n 's/^# workload\t//p' "$out.tsv")"
  grep '^# ' "$out.tsv" | grep -v '^# workload' | sed 's/^# /   /; s/\t/ = /'
  awk -v wl="$name" '{ printf "RESULT %s.%s=%s\n", wl, $1, $2 }' "$out.stats"
  awk -v wl="$name" -v a="$start" -v b="$end" 'BEGIN { printf "RESULT %s.wall_s=%.1f\n", wl, b - a }'
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$out.tsv" "$out.stats" "$KEEP/"; fi
done

# --- side by side ------------------------------------------------------------
echo
echo "== side by side (shares of jobs / tasks / summed CPU or memory request; sizes as shares of the largest machine)"
STATS=()
for name in "${NAMES[@]}"; do STATS+=("$WORK/$name.stats"); done
awk -v n="${#NAMES[@]}" -v names="${NAMES[*]}" '
  FNR == 1 { f++ }
  { if (!($1 in row)) { order[++R] = $1; row[$1] = 1 } val[$1, f] = $2 }
  END {
    split(names, nm, " ")
    printf "%-36s", "figure"; for (i = 1; i <= n; i++) printf " %12s", nm[i]; printf "\n"
    for (r = 1; r <= R; r++) {
      k = order[r]; printf "%-36s", k
      for (i = 1; i <= n; i++) printf " %12s", ((k, i) in val) ? val[k, i] : "-"
      printf "\n"
    }
  }' "${STATS[@]}"
