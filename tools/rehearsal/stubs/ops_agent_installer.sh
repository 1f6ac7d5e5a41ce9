#!/usr/bin/env bash
# A stand-in for Google's add-google-cloud-ops-agent-repo.sh: the boot sandboxes and the rehearsal
# are offline, so the startup script's install step gets this instead (tests/boot_sandbox.py
# serves it from the stand-in curl, the rehearsal from a file:// URL; neither downloads anything).
# It checks the arguments the real installer is given and leaves what the real package's install
# leaves for the boot to find: the agent's config directory.
set -euo pipefail
if [[ " $* " != *" --also-install "* || " $* " != *" --version=2."* ]]; then
  echo "stand-in Ops Agent installer: expected --also-install --version=2.*.*, got: $*" >&2
  exit 2
fi
mkdir -p "$(dirname "${TPUDEPLOY_OPS_AGENT_CONFIG:?the sandbox names the agent config}")"
echo "stand-in Ops Agent installer: google-cloud-ops-agent installed (nothing downloaded)" >&2
