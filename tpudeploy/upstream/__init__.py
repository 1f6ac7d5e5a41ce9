"""The scheduled upstream watch: judge each new vllm-tpu build on a flex-start node of its own."""
