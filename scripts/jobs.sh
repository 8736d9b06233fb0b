# Background jobs, at most one per core at a time; sourced by scripts/test.sh and scripts/fuzz.sh.
#
#   jobs_spawn CMD [ARG...]   start CMD in the background, first waiting for a job to end while
#                             as many run as there are cores
#   jobs_wait                 wait for every job started; status 1 if any of them failed
jobs_active=0
jobs_status=0

jobs_spawn() {
  if [ "$jobs_active" -ge "$(nproc)" ]; then
    wait -n || jobs_status=1
    jobs_active=$((jobs_active - 1))
  fi
  "$@" &
  jobs_active=$((jobs_active + 1))
}

jobs_wait() {
  while [ "$jobs_active" -gt 0 ]; do
    wait -n || jobs_status=1
    jobs_active=$((jobs_active - 1))
  done
  local status=$jobs_status
  jobs_status=0
  return "$status"
}
