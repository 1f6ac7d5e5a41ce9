#!/usr/bin/env bash
# A stand-in docker, curl, gcloud, sleep or node system command (iptables, ip6tables, mount,
# mountpoint, sshd, systemctl; tests/stubs links here under each name); what it does
# is stand_in.py's. With STAND_IN_PORT set (tests/boot_sandbox.py starts stand_in_server.py), the
# call goes to that long-lived server over loopback: a few ms of bash instead of ~70 ms of a new
# Python. Without it, stand_in.py answers in a process of its own. Builtins only on the fast path:
# the point is to start nothing but `cat` for the output.
name=${0##*/}
if [[ -z "${STAND_IN_PORT:-}" ]]; then
  exec python3 -S "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/stand_in.py" "$name" "$@"
fi
if ! exec 3<>"/dev/tcp/127.0.0.1/${STAND_IN_PORT}"; then
  echo "stand-in $name: no stand-in server on 127.0.0.1:${STAND_IN_PORT}" >&2
  exit 127
fi
# The server reads the environment and working directory from /proc/$$. Stdin goes with the
# request only where the stand-in reads it (`curl -K -`, the token's config; `docker exec -i`,
# the boot check's script read by the image's python): reading it for every call would swallow
# input meant for the script's next command.
stdin=0
if [[ $name == docker && ${1:-} == exec && ${2:-} == -i ]]; then
  stdin=1
fi
if [[ $name == curl ]]; then
  previous=
  for arg in "$@"; do
    if [[ $previous == -K && $arg == - ]]; then
      stdin=1
    fi
    previous=$arg
  done
fi
if ((stdin)); then
  input=$(
    cat
    printf x
  )
  printf '%s\0' "$$" "$name" 1 "${input%x}" "$#" "$@" >&3
else
  printf '%s\0' "$$" "$name" 0 "$#" "$@" >&3
fi
if ! read -r rc outlen <&3; then
  echo "stand-in $name: the stand-in server sent no answer (its traceback is above)" >&2
  exit 127
fi
IFS= read -r -d '' err <&3
printf '%s' "$err" >&2
if ((outlen > 0)); then
  cat <&3
fi
exit "$rc"
