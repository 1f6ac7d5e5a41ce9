"""The TPU VM platform's stacks: the node (and its firewall) and its deadline."""
