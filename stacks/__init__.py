"""CDKTF stacks: what exists in the cloud, declared from a validated DeployConfig."""

import os

# jsii prints a large Node-20 end-of-life banner on every import; the value must name the major
# version to silence it. Node 20 is what these machines have; the bindings still work on it.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
