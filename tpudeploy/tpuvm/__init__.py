"""What only the TPU VM platform has: one node (a spot or on-demand TPU VM, or a flex-start
queued resource), its deadline, its boot phases, its recovery.

What both platforms share stays in tpudeploy/ (config, planner, rendering of the serve line
and the proxy, the compile cache, secrets, the bench); GKE's own is tpudeploy/gke/. Standard
library only at import time: the workflows import tpudeploy.tpuvm.queued_resource before
`make install`.
"""
