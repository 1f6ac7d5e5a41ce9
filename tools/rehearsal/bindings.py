"""The cdktf bindings the rehearsal's stand-in providers are generated from (tools/rehearsal/
schema.py): google-beta 6.50.0 (cdktf-cdktf-provider-google-beta 16.12.1) and kubernetes 2.38.0
(cdktf-cdktf-provider-kubernetes 12.1.1), the versions their classes' docs links name."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Binding:
    """One provider's cdktf bindings: where the assembly is and how it names its modules."""

    name: str  # Terraform's local name and the provider's type: hashicorp/<name>
    package: str  # the Python bindings' module
    assembly: str  # the jsii assembly's name
    version: str  # the provider version the bindings were generated from (their docs links)
    provider_class: str  # the provider construct, relative to the assembly
    # A resource type's module folder is its type with this prefix dropped, kebab-cased
    # (google_tpu_v2_vm -> google-tpu-v2-vm, kubernetes_deployment_v1 -> deployment-v1); a data
    # source's is data- and its whole type (data-google-container-cluster).
    module_prefix: str = ""

    @property
    def source(self) -> str:
        return f"registry.terraform.io/hashicorp/{self.name}"

    def folder(self, type_name: str, *, data: bool = False) -> str:
        if data:
            return "data-" + type_name.replace("_", "-")
        return type_name.removeprefix(self.module_prefix).replace("_", "-")


GOOGLE_BETA = Binding(
    name="google-beta",
    package="cdktf_cdktf_provider_google_beta",
    assembly="@cdktf/provider-google-beta",
    version="6.50.0",
    provider_class="provider.GoogleBetaProvider",
)
KUBERNETES = Binding(
    name="kubernetes",
    package="cdktf_cdktf_provider_kubernetes",
    assembly="@cdktf/provider-kubernetes",
    version="2.38.0",
    provider_class="provider.KubernetesProvider",
    module_prefix="kubernetes_",
)
BINDINGS = {b.name: b for b in (GOOGLE_BETA, KUBERNETES)}

__all__ = ["BINDINGS", "GOOGLE_BETA", "KUBERNETES", "Binding"]
