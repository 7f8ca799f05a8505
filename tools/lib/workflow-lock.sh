# shellcheck shell=bash
# One workflow per output directory: tools/train-all-collections.sh and tools/make-submission.sh
# take OUT_DIR/workflow.lock (flock(1), the holder's pid inside) for their whole run, so a second
# one on the same OUT_DIR is refused at once, naming the first's pid. The kernel releases the lock
# when its process dies (kill -9 included): a killed run's lock file never blocks the next run,
# which takes it over and removes it at its end. Sourced; then:
#   workflow_lock OUT_DIR SCRIPT_NAME   # exits 1 when another process holds it
workflow_lock() {
  local out=$1 name=$2 lock=$1/workflow.lock attempt
  for attempt in 1 2 3; do
    exec {workflow_lock_fd}<>"$lock"
    if ! flock -n "$workflow_lock_fd"; then
      echo "$name: $out is in use by another workflow (pid $(cat "$lock" 2>/dev/null || echo unknown), lock $lock): wait for it to end, or stop it" >&2
      exit 1
    fi
    # The file locked must still be the one at the path (a holder removes it when it ends).
    if [ "$(stat -L -c %i "/proc/$$/fd/$workflow_lock_fd")" = "$(stat -c %i "$lock" 2>/dev/null)" ]; then
      # shellcheck disable=SC2064
      trap "rm -f '$lock'" EXIT
      # The pid for a refused second run's message; without it (a full disk) the lock holds.
      { echo "$$" >"$lock"; } 2>/dev/null || true
      return 0
    fi
    exec {workflow_lock_fd}>&-
  done
  echo "$name: $lock kept being replaced; is another process removing it?" >&2
  exit 1
}

# Removes the lock files under OUT_DIR (train's <output>.lock) that no process holds: left by a
# run killed just as it finished. Only while holding OUT_DIR's workflow lock.
remove_stale_locks() {
  local f
  for f in "$1"/*.lock; do
    [ -e "$f" ] && [ "$f" != "$1/workflow.lock" ] || continue
    flock -n "$f" rm -f "$f" || true
  done
}

# Removes the temporaries ("NAME.tmp-PID-N") under OUT_DIR whose process has ended: left by a
# process killed while it wrote, when no later run rewrote that output (a dataset, say). Only
# while holding OUT_DIR's workflow lock.
remove_stale_temporaries() {
  local f pid
  for f in "$1"/*.tmp-*; do
    [ -e "$f" ] || continue
    pid=${f##*.tmp-}
    pid=${pid%%-*}
    case "$pid" in '' | *[!0-9]*) continue ;; esac
    # Alive unless gone or a zombie (ended, not yet reaped).
    if kill -0 "$pid" 2>/dev/null &&
      [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]; then
      continue
    fi
    rm -rf "$f"
  done
}
