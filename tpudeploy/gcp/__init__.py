"""Every call the project makes to a Google API, and the one way it reaches one.

apis.py names each API (its emulator variable, its URL), session.py is the session factory (the
loopback emulator or Application Default Credentials, one credential check, one way to turn an
HTTP failure into the client's error), and one module per API holds its calls: secretmanager,
storage (the compile cache) and statebucket (the Terraform state bucket), resourcemanager,
serviceusage, container, tpu, scheduler, logentries (make logs). The TPU API, Cloud Scheduler and
the warm path's object listing go through googleapiclient's discovery client
(tpudeploy/gcp/discovery.py), which takes its credentials from session.py too.

Standard library only at import, here and in apis.py and session.py: google.auth and requests
load inside the functions that need them (tpudeploy.tpuvm.queued_resource imports this package
under a bare python3: tests/layout/test_layout.py).
"""
