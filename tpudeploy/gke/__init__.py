"""The GKE platform's own domain code: replica planning, the pod's spec, the platform seam.

Shared with the TPU VM (never copied): the config, the planner, the `vllm serve` line and the
proxy's config (tpudeploy.render), the compile-cache key and sanitizer (tpudeploy.cacheguard).
"""
