"""CDKTF stacks: what exists in the cloud, declared from a validated DeployConfig."""

import importlib.util
import os
import sys

# jsii prints a large Node-20 end-of-life banner on every import; the value must name the major
# version to silence it. Node 20 is what these machines have; the bindings still work on it.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

# The prebuilt bindings' package __init__ imports every one of its resource modules (1,624 for
# google-beta, 108 for kubernetes) "to ensure their types are registered with the jsii runtime"
# before the first resource can be declared: 12-13 s of CPU on every synth (make synth, each
# cdktf deploy/diff/destroy, every test process), for the ~30 modules these stacks import. So
# the package is registered bare (its path, none of its code) and each stack module imports the
# submodules it names, as it does already; a submodule loads the jsii assembly itself (its
# `from .._jsii import *`). A type from a module nobody imported cannot reach Python unnoticed:
# jsii raises "Unknown type" for it (jsii/_reference_map.py, resolve). tests/stacks/test_synth.py
# proves the JSON is the same as with the package's own eager import.
EAGER_PROVIDERS_ENV = "TPUDEPLOY_EAGER_PROVIDERS"
PROVIDER_PACKAGES = ("cdktf_cdktf_provider_google_beta", "cdktf_cdktf_provider_kubernetes")


def _register_bare(package: str) -> None:
    if package in sys.modules:
        return  # already imported (eagerly, by whoever came first): nothing to save
    spec = importlib.util.find_spec(package)
    if spec is None or spec.submodule_search_locations is None:
        return  # not installed: the stack module's own import says so
    sys.modules[package] = importlib.util.module_from_spec(spec)


if os.environ.get(EAGER_PROVIDERS_ENV) != "1":
    for _package in PROVIDER_PACKAGES:
        _register_bare(_package)
