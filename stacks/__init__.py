"""CDKTF stacks: what exists in the cloud, declared from a validated DeployConfig."""
