"""The GKE platform's stacks: the cluster and its TPU pools, and the Kubernetes objects."""
