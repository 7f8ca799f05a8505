#!/usr/bin/env bash
# A kill soak of the release workflow: runs tools/train-all-collections.sh and
# tools/make-submission.sh on a small release-shaped tree once uninterrupted (the reference), then
# again in a second output directory, killed N times at seeded moments (ingest, training,
# checkpoint writes, evaluation, the submission; 70% SIGKILL, 15% SIGTERM, 15% SIGINT of the
# whole process group) and started again with the same command after each kill, the last time
# to the end. Then it compares every outcome with the reference's and lists what the kills left
# behind (docs/train.md, "Killed and run again").
#
# Usage: tools/dev/soak-resume.sh [--kills N] [--seed S] [--work DIR] [--scale S]
#   --kills N   kills before the run that goes to the end (default 10)
#   --seed S    seeds the kills' moments and signals (default 1): the same seed, the same plan
#   --work DIR  default /tmp/soak-resume: tree/ (the release-shaped tree, made once and reused
#               while its parameters stay the same), ref/ and killed/ (the two output
#               directories, cleared first), the runs' stderr (ref.err, kill-K.err, final.err),
#               soak.txt and soak.json (the report), and pinned/: the binary and the workflow's
#               scripts, copied at the start, so that a rebuild or an edit of the checkout
#               during the soak does not mix versions
#   --scale S   the tree's scale (tools/make-release-shaped.sh S; default 0.01)
# Environment: TPUGRAPHS (binary), SOAK_TRAIN_FLAGS (the train flags of every run, default
#   "--epochs 50 --steps-per-epoch 16 --ensemble-members 2 --min-config-passes 0
#   --checkpoint-interval-seconds 0.5": about a minute on 2 cores, a checkpoint every half
#   second, so that kills land inside trainings), SOAK_JOBS (JOBS of the workflow, default 2),
#   SOAK_MAX_NODES / SOAK_MAX_CONFIGS (the tree's caps, default 5000 / 500), SOAK_SIGNAL_WAIT
#   (seconds a run may take to end after SIGTERM or SIGINT before it counts as a fault and is
#   killed, default 5: tpugraphs removes its temporaries and ends at once).
#
# What it prints (stdout; progress on stderr, with the machine header of the benchmarks):
#   the kills by signal and by stage (the run's last "== ..." line before the kill, and a
#   checkpoint or model write when such a temporary existed at that moment), the differences
#   from the reference (each model's scores on the test split, each *.valid.json less its
#   "scorer" lines, the submission, byte for byte), the leftovers (paths in the killed run's
#   output directory that the reference's lacks, and the other way round), the time lost per
#   kill (from the newest file written before the kill to the kill, plus a resume's start-up:
#   the finished workflow run again in the reference's directory; median and worst) and in all
#   (the runs' wall time less the reference's), and the reference's wall time. WORK/soak.json
#   holds the same. Exit 1 when anything differs, is left over or failed, else 0; 2 for a bad
#   flag.
set -euo pipefail

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
kills=10
seed=1
work=/tmp/soak-resume
scale=0.01
need_value() { [ "$2" -ge 2 ] || { echo "soak-resume.sh: $1 needs a value" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --kills) need_value "$1" $#; kills=$2; shift ;;
    --kills=*) kills=${1#*=} ;;
    --seed) need_value "$1" $#; seed=$2; shift ;;
    --seed=*) seed=${1#*=} ;;
    --work) need_value "$1" $#; work=$2; shift ;;
    --work=*) work=${1#*=} ;;
    --scale) need_value "$1" $#; scale=$2; shift ;;
    --scale=*) scale=${1#*=} ;;
    *) echo "soak-resume.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
  shift
done
case "$kills" in '' | *[!0-9]*) echo "soak-resume.sh: --kills wants a count, got '$kills'" >&2; exit 2 ;; esac
case "$seed" in '' | *[!0-9]*) echo "soak-resume.sh: --seed wants a number, got '$seed'" >&2; exit 2 ;; esac
case "$scale" in '' | *[!0-9.]* | *.*.* | .) echo "soak-resume.sh: --scale wants a positive number, got '$scale'" >&2; exit 2 ;; esac
case "$scale" in *[1-9]*) ;; *) echo "soak-resume.sh: --scale wants a positive number, got '$scale'" >&2; exit 2 ;; esac
[ -n "$work" ] || { echo "soak-resume.sh: --work wants a directory" >&2; exit 2; }
jobs=${SOAK_JOBS:-2}
case "$jobs" in '' | *[!0-9]* | 0) echo "soak-resume.sh: SOAK_JOBS must be a count >= 1" >&2; exit 2 ;; esac
max_nodes=${SOAK_MAX_NODES:-5000}
max_configs=${SOAK_MAX_CONFIGS:-500}
signal_wait=${SOAK_SIGNAL_WAIT:-5}
case "$signal_wait" in '' | *[!0-9]*) echo "soak-resume.sh: SOAK_SIGNAL_WAIT must be whole seconds" >&2; exit 2 ;; esac
read -r -a train_flags <<<"${SOAK_TRAIN_FLAGS:---epochs 50 --steps-per-epoch 16 --ensemble-members 2 --min-config-passes 0 --checkpoint-interval-seconds 0.5}"

here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
# shellcheck source=tools/lib/bench-machine.sh
source "$here/tools/lib/bench-machine.sh"
bin=$(tpugraphs_binary)
export LC_ALL=C  # EPOCHREALTIME with a '.', sort and comm in byte order
shopt -s nullglob
mkdir -p "$work"
work=$(cd "$work" && pwd)
log() { echo "== soak: $*" >&2; }

# The binary and the workflow's scripts, copied: every run of the soak uses the same ones even
# when the checkout is rebuilt or edited meanwhile (bash reads a script as it runs it).
[ -x "$bin" ] || { echo "soak-resume.sh: no tpugraphs binary at $bin" >&2; exit 1; }
pinned=$work/pinned
rm -rf "$pinned"
mkdir -p "$pinned/tools"
cp "$bin" "$pinned/tpugraphs"
cp -r "$here"/tools/{train-all-collections.sh,make-submission.sh,release-collections.sh,make-release-shaped.sh,lib,configs,release} \
  "$pinned/tools/"
bin=$pinned/tpugraphs
export TPUGRAPHS=$bin

# --- clock and pauses without a process per tick ----------------------------------------------
now() { NOW=${EPOCHREALTIME/./}; }  # microseconds
rm -f "$work/.tick"
mkfifo "$work/.tick"
exec {tick}<>"$work/.tick"
rm -f "$work/.tick"
pause() { read -r -t "$1" -u "$tick" _ || true; }
secs() {  # MICROSECONDS -> seconds with 3 decimals
  local us=$1 sign=
  [ "$us" -lt 0 ] && { sign=-; us=$((-us)); }
  printf '%s%d.%03d' "$sign" $((us / 1000000)) $(((us % 1000000) / 1000))
}
js() {  # a JSON string
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/\\t}
  s=${s//$'\n'/\\n}
  printf '"%s"' "$s"
}

# A soak stopped itself takes the run it is watching with it (that run has a session of its own).
running=''
trap '[ -z "$running" ] || kill -KILL -- "-$running" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench_machine_header

# --- the tree, made once ----------------------------------------------------------------------
tree=$work/tree
params="scale=$scale max_nodes=$max_nodes max_configs=$max_configs seed=1"
if [ -f "$tree/shape.tsv" ] && [ "$(cat "$work/tree.params" 2>/dev/null)" = "$params" ]; then
  log "reusing the tree $tree ($params)"
else
  rm -rf "$tree" "$work/tree.params"
  log "making the tree $tree ($params)"
  SEED=1 MAX_NODES=$max_nodes MAX_CONFIGS=$max_configs \
    bash "$pinned/tools/make-release-shaped.sh" "$scale" "$tree" 2>"$work/tree.err" ||
    { cat "$work/tree.err" >&2; exit 1; }
  echo "$params" >"$work/tree.params"
fi

# --- one run of the workflow (a segment), watched and maybe killed ---------------------------
# segment LABEL OUT KIND FRAC SIGNAL: runs both scripts in OUT in a process group of their own
# (SIGINT and SIGTERM at their defaults, as in a terminal) with stderr to WORK/LABEL.err, and
# kills the group with SIGNAL when the moment KIND (none: never) comes. Sets:
#   seg_wall (us), seg_rc, seg_killed (1 when the signal was sent), seg_elapsed (us from the
#   start to the kill), seg_kill_at (us, the clock), seg_last (the last "== " line before the
#   kill), seg_writing (the temporaries in OUT at the kill), seg_straggle (what was still running
#   SOAK_SIGNAL_WAIT s after the signal: a fault), and seg_times[PATTERN] (us from the start to
#   the first line matching each pattern of `marks`).
# alive PGID: a process of the group is still running (zombies, which the machine's init reaps
# when it will, do not count).
alive() {
  kill -0 -- "-$1" 2>/dev/null || return 1
  # shellcheck disable=SC2009  # pgrep cannot leave the zombies out
  ps -o stat= -g "$1" | grep -qv '^Z'
}
marks=(": ingest " ": train " ": evaluate on the valid split" ": predict the test split")
declare -A seg_times
segment() {
  local label=$1 out=$2 kind=$3 frac=$4 sig=$5
  local err=$work/$label.err line buf='' t0 fire_at=-1 armed=0 pid fd state m st i
  local -a temps
  : >"$err"
  seg_times=() seg_killed=0 seg_elapsed=0 seg_kill_at=0 seg_last='' seg_writing='' seg_straggle=''
  now
  t0=$NOW
  # shellcheck disable=SC2016  # expanded by the inner bash
  setsid env --default-signal=INT,TERM bash -c '
    jobs=$1 here=$2 tree=$3 out=$4
    shift 4
    JOBS=$jobs bash "$here/tools/train-all-collections.sh" "$tree" "$out" "$@" &&
      bash "$here/tools/make-submission.sh" "$out" "$out/submission.csv"' \
    _ "$jobs" "$pinned" "$tree" "$out" "${train_flags[@]}" >"$work/$label.out" 2>"$err" </dev/null &
  pid=$!
  running=$pid
  exec {fd}<"$err"
  while :; do
    now
    # The new lines of stderr, each stamped when first seen.
    while IFS= read -r -u "$fd" line || { buf+=$line; line=; false; }; do
      line=$buf$line buf=
      for m in "${marks[@]}"; do
        [[ "$line" == *"$m"* ]] && [ -z "${seg_times[$m]:-}" ] && seg_times[$m]=$((NOW - t0))
      done
      [[ "$line" == "== "* ]] && seg_last=$line
    done
    read -r _ _ state _ 2>/dev/null <"/proc/$pid/stat" || state=Z
    [ "$state" = Z ] && break
    # The moment of the kill.
    case "$kind" in
      ingest | train | evaluate | submission)
        # From the stage's first line: in training (0.3 + 0.7 FRAC) of a kill's share of the
        # reference's training, elsewhere FRAC of the first 80% of the reference's stage (60% in
        # evaluation, which a resume often runs faster).
        case "$kind" in
          ingest) m=${marks[0]} st=$((ref_ingest_span * 8 * frac / 10000)) ;;
          train) m=${marks[1]} st=$((ref_train_span * (300 + 7 * frac / 10) / 1000 / (n_train + 1))) ;;
          evaluate) m=${marks[2]} st=$((ref_eval_span * 6 * frac / 10000)) ;;
          submission) m=${marks[3]} st=$((ref_sub_span * 8 * frac / 10000)) ;;
        esac
        [ -n "${seg_times[$m]:-}" ] && fire_at=$((seg_times[$m] + st)) ;;
      checkpoint)
        # Armed a while into the training, then on the first checkpoint temporary seen (during
        # its write); 3 s after arming without one, at once.
        if [ -n "${seg_times[${marks[1]}]:-}" ]; then
          st=$((seg_times[${marks[1]}] + ref_train_span * frac / 2000 / (n_train + 1)))
          if [ $((NOW - t0)) -ge "$st" ]; then
            armed=1
            temps=("$out"/*.ckpt*.tmp-*)
            if [ ${#temps[@]} -gt 0 ] || [ $((NOW - t0)) -ge $((st + 3000000)) ]; then
              fire_at=0
            fi
          fi
        fi ;;
    esac
    if [ "$fire_at" -ge 0 ] && [ $((NOW - t0)) -ge "$fire_at" ]; then
      temps=("$out"/*.tmp-* "$out"/*.tmp)
      seg_writing=${temps[*]##*/}
      now
      seg_kill_at=$NOW
      seg_elapsed=$((NOW - t0))
      kill -s "$sig" -- "-$pid" 2>/dev/null || true
      seg_killed=1
      break
    fi
    if [ "$kind" = checkpoint ] && [ "$armed" = 1 ]; then pause 0.002; else pause 0.01; fi
  done
  # The end of the group: the leader, then anything of it still running.
  seg_rc=0
  wait "$pid" 2>/dev/null || seg_rc=$?
  for ((i = 0; i < signal_wait * 20; i++)); do
    alive "$pid" || break
    pause 0.05
  done
  if alive "$pid"; then
    seg_straggle=$(ps -o pid=,stat=,args= -g "$pid" | awk '$2 !~ /^Z/' | sed 's/^ *//' | tr '\n' ';')
    kill -KILL -- "-$pid" 2>/dev/null || true
    while alive "$pid"; do pause 0.05; done
  fi
  running=''
  now
  seg_wall=$((NOW - t0))
  while IFS= read -r -u "$fd" line; do :; done
  exec {fd}<&-
}

# --- the reference ------------------------------------------------------------------------------
ref=$work/ref
killed=$work/killed
rm -rf "$ref" "$killed" "$work"/kill-*.err "$work"/kill-*.out "$work"/outcome-*
log "reference: the workflow uninterrupted in $ref (JOBS=$jobs, train flags: ${train_flags[*]})"
n_train=1 ref_ingest_span=0 ref_train_span=0 ref_eval_span=0 ref_sub_span=0
segment ref "$ref" none 0 KILL
[ "$seg_rc" -eq 0 ] || { cat "$work/ref.err" >&2; echo "soak-resume.sh: the reference run failed" >&2; exit 1; }
ref_wall=$seg_wall
# The stages' spans in the reference: from the first line of one to the first of the next.
mark() { echo "${seg_times[${marks[$1]}]:-$2}"; }
t_ing=$(mark 0 0)
t_train=$(mark 1 "$t_ing")
t_eval=$(mark 2 "$t_train")
t_sub=$(mark 3 "$t_eval")
ref_ingest_span=$((t_train - t_ing))
ref_train_span=$((t_eval - t_train))
ref_eval_span=$((t_sub - t_eval))
ref_sub_span=$((ref_wall - t_sub))
log "reference: $(secs "$ref_wall") s (ingest $(secs "$ref_ingest_span") s, training $(secs "$ref_train_span") s, evaluation $(secs "$ref_eval_span") s, submission $(secs "$ref_sub_span") s)"
# A resume's start-up: the finished workflow again, everything reused.
segment startup "$ref" none 0 KILL
[ "$seg_rc" -eq 0 ] || { cat "$work/startup.err" >&2; echo "soak-resume.sh: the finished workflow run again failed" >&2; exit 1; }
startup=$seg_wall
log "a resume's start-up (the finished workflow again): $(secs "$startup") s"

# --- the plan: each kill's stage and signal, seeded --------------------------------------------
# In the order of the workflow: an ingest, kills in training (at a moment, or during a
# checkpoint write), in evaluation, in the submission. Fewer than 5 kills: some of them.
RANDOM=$seed
rand() { R=$((RANDOM * 1000 / 32768)); }  # 0..999
plan=()
if [ "$kills" -ge 5 ]; then
  n_sub=$(((kills * 15 + 50) / 100)) n_eval=$(((kills * 15 + 50) / 100)) n_ckpt=$(((kills * 20 + 50) / 100))
  n_sub=$((n_sub > 0 ? n_sub : 1)) n_eval=$((n_eval > 0 ? n_eval : 1)) n_ckpt=$((n_ckpt > 0 ? n_ckpt : 1))
  n_time=$((kills - 1 - n_sub - n_eval - n_ckpt))
  mid=()
  for ((i = 0; i < n_time; i++)); do mid+=(train); done
  for ((i = 0; i < n_ckpt; i++)); do mid+=(checkpoint); done
  for ((i = ${#mid[@]} - 1; i > 0; i--)); do  # shuffled
    rand
    j=$((R * (i + 1) / 1000))
    t=${mid[i]} mid[i]=${mid[j]} mid[j]=$t
  done
  plan=(ingest "${mid[@]}")
  for ((i = 0; i < n_eval; i++)); do plan+=(evaluate); done
  for ((i = 0; i < n_sub; i++)); do plan+=(submission); done
else
  all=(ingest train checkpoint evaluate submission)
  pick=()
  for ((i = 0; i < kills; i++)); do
    rand
    j=$((R * (5 - i) / 1000))
    pick+=("${all[$j]}")
    all=("${all[@]:0:$j}" "${all[@]:$((j + 1))}")
  done
  for k in ingest train checkpoint evaluate submission; do
    [[ " ${pick[*]} " == *" $k "* ]] && plan+=("$k")
  done
fi
n_train=0
for k in "${plan[@]}"; do
  case "$k" in train | checkpoint) n_train=$((n_train + 1)) ;; esac
done

# --- the killed run ---------------------------------------------------------------------------
kill_rows=()   # "n|signal|planned|stage|last line|writing|after us|lost us|exit|run us"
faults=()
missed=0
segments_wall=0
lost_list=()
declare -A by_signal by_stage
k=0
while [ "$k" -lt "$kills" ]; do
  kind=${plan[$k]}
  rand
  if [ "$R" -lt 700 ]; then sig=KILL; elif [ "$R" -lt 850 ]; then sig=TERM; else sig=INT; fi
  rand
  frac=$R
  label=kill-$((k + 1))
  log "kill $((k + 1))/$kills: SIG$sig in $kind"
  segment "$label" "$killed" "$kind" "$frac" "$sig"
  segments_wall=$((segments_wall + seg_wall))
  if [ "$seg_killed" = 0 ]; then
    if [ "$seg_rc" -ne 0 ]; then
      faults+=("run $label (not killed) exited $seg_rc: $(grep -v '^\[' "$work/$label.err" | tail -3 | tr '\n' ' ')")
    fi
    # The run ended before the moment came: the kill goes to the submission instead.
    missed=$((missed + 1))
    log "the run ended before the moment ($kind); the kill moves to the submission"
    plan[k]=submission
    [ "$missed" -le $((kills + 3)) ] || { faults+=("too many kills missed their moment"); break; }
    continue
  fi
  [ -n "$seg_straggle" ] && faults+=("kill $((k + 1)) (SIG$sig): still running ${signal_wait} s after the signal, killed: $seg_straggle")
  # The stage: a checkpoint or model write when its temporary existed, else the last line's.
  case "$seg_last" in
    '') stage=start-up ;;
    *": ingest "*) stage=ingest ;;
    *": train "*--ensemble-member*) stage=train ;;
    *"resuming the interrupted training"*) stage=train ;;
    *": train "*) stage=ensemble ;;
    *": evaluate on the valid split"*) stage=evaluate ;;
    *": predict the test split"* | *"== wrote "* | *"not in the submission"* | *"== no model for"*) stage=submission ;;
    *"training graphs"*) stage=start-up ;;
    *"== done: "*) stage=submission ;;
    *) stage=other ;;
  esac
  case " $seg_writing " in
    *".ckpt"*".tmp-"*) stage=checkpoint-write ;;
    *".tpm.tmp-"* | *".tpm.member-"[0-9]*".tmp-"*) stage=model-write ;;
  esac
  # Lost: from the newest file written before the kill (within this run) to the kill, plus a
  # resume's start-up.
  newest=$(find "$killed" -type f -printf '%T@\n' 2>/dev/null |
    awk -v k="$seg_kill_at" '{ t = $1 * 1e6; if (t <= k && t > m) m = t } END { printf "%.0f", m }')
  since=$((seg_kill_at - newest))
  [ "$since" -gt "$seg_elapsed" ] && since=$seg_elapsed
  lost=$((since + startup))
  lost_list+=("$lost")
  by_signal[SIG$sig]=$((${by_signal[SIG$sig]:-0} + 1))
  by_stage[$stage]=$((${by_stage[$stage]:-0} + 1))
  kill_rows+=("$((k + 1))|$sig|$kind|$stage|$seg_last|$seg_writing|$seg_elapsed|$lost|$seg_rc|$seg_wall")
  log "kill $((k + 1)): SIG$sig after $(secs "$seg_elapsed") s, stage $stage (${seg_last:-no line yet})${seg_writing:+, writing $seg_writing}"
  k=$((k + 1))
done
log "the last run, to the end"
segment final "$killed" none 0 KILL
segments_wall=$((segments_wall + seg_wall))
final_wall=$seg_wall
[ "$seg_rc" -eq 0 ] || faults+=("the last run (uninterrupted) exited $seg_rc: $(grep -v '^\[' "$work/final.err" | tail -3 | tr '\n' ' ')")
resumed=$(cat "$work"/kill-*.err "$work/final.err" | grep -c "resuming the interrupted training" || true)

# --- differences --------------------------------------------------------------------------------
outcome() {  # OUT DEST: the outcomes, one file each
  local dir=$1 dest=$2 m
  mkdir -p "$dest"
  for m in "$dir"/*.tpm; do
    [ -f "$m" ] || continue
    "$bin" -q predict --data "${m%.tpm}.tpug" --split test --model "$m" --format scores \
      --output "$dest/scores.tmp" >/dev/null 2>"$dest/predict.err" ||
      { echo "predict failed: $(cat "$dest/predict.err")" >"$dest/scores.tmp"; }
    grep -v '^#' "$dest/scores.tmp" >"$dest/$(basename "$m").test-scores" || true
  done
  rm -f "$dest/scores.tmp" "$dest/predict.err"
  for m in "$dir"/*.valid.json; do
    [ -f "$m" ] || continue
    grep -v '"scorer"' "$m" >"$dest/$(basename "$m")" || true
  done
  [ -f "$dir/submission.csv" ] && cp "$dir/submission.csv" "$dest/submission.csv"
  return 0
}
log "comparing the outcomes"
outcome "$ref" "$work/outcome-ref"
outcome "$killed" "$work/outcome-killed"
differences=()
while IFS= read -r item; do
  a=$work/outcome-ref/$item b=$work/outcome-killed/$item
  if [ ! -e "$a" ]; then
    differences+=("$item: only in the killed run")
  elif [ ! -e "$b" ]; then
    differences+=("$item: missing in the killed run")
  elif ! cmp -s "$a" "$b"; then
    differences+=("$item: differs ($(diff "$a" "$b" | grep -c '^[<>]') lines)")
  fi
done < <(find "$work/outcome-ref" "$work/outcome-killed" -type f -printf '%f\n' | sort -u)
items=$(find "$work/outcome-ref" -type f | wc -l)

# --- leftovers ------------------------------------------------------------------------------------
(cd "$ref" && find . -mindepth 1 -printf '%P\n' | sort) >"$work/ref.files"
(cd "$killed" && find . -mindepth 1 -printf '%P\n' | sort) >"$work/killed.files"
mapfile -t leftovers < <(comm -13 "$work/ref.files" "$work/killed.files")
mapfile -t missing < <(comm -23 "$work/ref.files" "$work/killed.files")

# --- time lost ------------------------------------------------------------------------------------
if [ ${#lost_list[@]} -gt 0 ]; then
  read -r lost_median lost_worst < <(printf '%s\n' "${lost_list[@]}" | sort -n |
    awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                              printf "%.0f %.0f\n", m, v[NR] }')
else
  lost_median=0 lost_worst=0
fi
lost_total=$((segments_wall - ref_wall))
bench_machine_footer

# --- the report -----------------------------------------------------------------------------------
counts() {  # NAME of an associative array -> "A 3, B 1"
  local -n a=$1
  local key out=
  for key in $(printf '%s\n' "${!a[@]}" | sort); do out+="${out:+, }$key ${a[$key]}"; done
  echo "${out:-none}"
}
{
  echo "soak: $k kills (seed $seed; $missed moved to the submission when the run ended first), tree S=$scale (nodes <= $max_nodes, configs <= $max_configs), JOBS=$jobs"
  echo "train flags: ${train_flags[*]}"
  echo "reference: $(secs "$ref_wall") s wall; a resume's start-up: $(secs "$startup") s (the finished workflow run again)"
  echo "kills by signal: $(counts by_signal)"
  echo "kills by stage: $(counts by_stage)"
  for row in "${kill_rows[@]}"; do
    IFS='|' read -r n sig kind stage last writing after lost rc run <<<"$row"
    printf '  kill %2d: SIG%-4s after %7s s (run %7s s)  planned %-10s hit %-16s lost %6s s  (%s)%s\n' \
      "$n" "$sig" "$(secs "$after")" "$(secs "$run")" "$kind" "$stage" "$(secs "$lost")" \
      "${last:-no line yet}" "${writing:+ writing: $writing}"
  done
  echo "runs that resumed an interrupted training: $resumed"
  echo "differences: ${#differences[@]} (of $items outcomes: test scores per model, *.valid.json, submission)"
  for d in "${differences[@]}"; do echo "  $d"; done
  echo "leftovers: ${#leftovers[@]} (in the killed run's directory, not in the reference's)"
  for d in "${leftovers[@]}"; do echo "  $d"; done
  echo "missing: ${#missing[@]} (in the reference's directory, not in the killed run's)"
  for d in "${missing[@]}"; do echo "  $d"; done
  echo "faults: ${#faults[@]}"
  for d in "${faults[@]}"; do echo "  $d"; done
  echo "the last run (to the end): $(secs "$final_wall") s"
  echo "time lost per kill: median $(secs "$lost_median") s, worst $(secs "$lost_worst") s; total $(secs "$lost_total") s (the runs' $(secs "$segments_wall") s less the reference's $(secs "$ref_wall") s)"
  echo "reference wall time: $(secs "$ref_wall") s"
} | tee "$work/soak.txt"

jarr() {  # strings -> a JSON array
  local s out=
  for s in "$@"; do out+="${out:+, }$(js "$s")"; done
  printf '[%s]' "$out"
}
jobj() {  # NAME of an associative array of counts -> a JSON object
  local -n a=$1
  local key out=
  for key in $(printf '%s\n' "${!a[@]}" | sort); do out+="${out:+, }$(js "$key"): ${a[$key]}"; done
  printf '{%s}' "$out"
}
ok=true
[ ${#differences[@]} -eq 0 ] && [ ${#leftovers[@]} -eq 0 ] && [ ${#missing[@]} -eq 0 ] &&
  [ ${#faults[@]} -eq 0 ] || ok=false
{
  echo "{"
  echo "  \"machine\": $(bench_machine_json),"
  echo "  \"seed\": $seed, \"kills\": $k, \"kills_requested\": $kills, \"moved_to_submission\": $missed,"
  echo "  \"scale\": $(awk -v s="$scale" 'BEGIN { printf "%g", s }'), \"max_nodes\": $max_nodes, \"max_configs\": $max_configs, \"jobs\": $jobs,"
  echo "  \"train_flags\": $(js "${train_flags[*]}"),"
  echo "  \"reference_wall_s\": $(secs "$ref_wall"), \"resume_startup_s\": $(secs "$startup"),"
  echo "  \"reference_stage_s\": {\"ingest\": $(secs "$ref_ingest_span"), \"train\": $(secs "$ref_train_span"), \"evaluate\": $(secs "$ref_eval_span"), \"submission\": $(secs "$ref_sub_span")},"
  echo "  \"kills_by_signal\": $(jobj by_signal),"
  echo "  \"kills_by_stage\": $(jobj by_stage),"
  echo "  \"kill_list\": ["
  i=0
  for row in "${kill_rows[@]}"; do
    IFS='|' read -r n sig kind stage last writing after lost rc run <<<"$row"
    i=$((i + 1))
    read -r -a w <<<"$writing"
    printf '    {"kill": %d, "signal": "SIG%s", "planned": "%s", "stage": "%s", "last_line": %s, "writing": %s, "after_s": %s, "run_s": %s, "lost_s": %s, "exit": %d}%s\n' \
      "$n" "$sig" "$kind" "$stage" "$(js "$last")" "$(jarr "${w[@]}")" "$(secs "$after")" \
      "$(secs "$run")" "$(secs "$lost")" "$rc" "$([ "$i" -lt ${#kill_rows[@]} ] && echo ,)"
  done
  echo "  ],"
  echo "  \"resumed_trainings\": $resumed,"
  echo "  \"outcomes_compared\": $items,"
  echo "  \"differences\": $(jarr "${differences[@]}"),"
  echo "  \"leftovers\": $(jarr "${leftovers[@]}"),"
  echo "  \"missing\": $(jarr "${missing[@]}"),"
  echo "  \"faults\": $(jarr "${faults[@]}"),"
  echo "  \"time_lost_per_kill_s\": {\"median\": $(secs "$lost_median"), \"worst\": $(secs "$lost_worst")},"
  echo "  \"time_lost_total_s\": $(secs "$lost_total"), \"runs_wall_s\": $(secs "$segments_wall"), \"last_run_s\": $(secs "$final_wall"),"
  echo "  \"ok\": $ok"
  echo "}"
} >"$work/soak.json"
log "report in $work/soak.txt and $work/soak.json"
[ "$ok" = true ]
