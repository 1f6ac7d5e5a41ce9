"""The billing stack: the TPU node, its firewall rules and the outputs to reach it."""

from __future__ import annotations

from cdktf import TerraformOutput, TerraformStack
from cdktf_cdktf_provider_google_beta.google_compute_firewall import (
    GoogleComputeFirewall,
    GoogleComputeFirewallAllow,
)
from cdktf_cdktf_provider_google_beta.google_tpu_v2_vm import (
    GoogleTpuV2Vm,
    GoogleTpuV2VmNetworkConfig,
    GoogleTpuV2VmSchedulingConfig,
    GoogleTpuV2VmServiceAccount,
    GoogleTpuV2VmShieldedInstanceConfig,
)
from constructs import Construct

from stacks.common import configure, service_account_email, terraform_literal
from tpudeploy.config import IAP_SSH_RANGE, DeployConfig
from tpudeploy.render import node_metadata

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class TpuNodeStack(TerraformStack):
    """Creates: the TPU v2 VM (spot or on-demand) running the seed's vLLM launch, a firewall rule
    for the vLLM port (only when allowed_cidrs is set) and one for SSH from Google's IAP range."""

    def __init__(self, scope: Construct, id_: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id_)
        cfg = config
        project = configure(self, cfg)
        labels = {"deployment": cfg.name, "provisioning": cfg.provisioning, **cfg.labels}

        # google_tpu_v2_vm exists only in google-beta; the GA bindings have the legacy tpu_node.
        node = GoogleTpuV2Vm(
            self,
            "node",
            name=cfg.node_id,
            zone=cfg.zone,
            accelerator_type=cfg.accelerator_type,
            runtime_version=cfg.runtime_version,
            description=f"vLLM {cfg.vllm.model} ({cfg.provisioning})",
            scheduling_config=GoogleTpuV2VmSchedulingConfig(spot=True)
            if cfg.provisioning == "spot"
            else None,
            service_account=GoogleTpuV2VmServiceAccount(
                email=service_account_email(cfg, project), scope=[CLOUD_PLATFORM_SCOPE]
            ),
            network_config=GoogleTpuV2VmNetworkConfig(
                network=cfg.network.network,
                subnetwork=cfg.network.subnetwork or None,
                enable_external_ips=cfg.network.enable_external_ip,
            ),
            shielded_instance_config=GoogleTpuV2VmShieldedInstanceConfig(enable_secure_boot=True),
            metadata={k: terraform_literal(v) for k, v in node_metadata(cfg).items()},
            tags=[cfg.network_tag],
            labels=labels,
        )

        if cfg.network.allowed_cidrs:
            # Only with ranges: a GCE rule with no source ranges and no source tags means
            # 0.0.0.0/0, so an empty list must mean "no rule", never "an empty rule".
            GoogleComputeFirewall(
                self,
                "allow-vllm",
                name=f"{cfg.name}-allow-vllm",
                network=cfg.network.network,
                direction="INGRESS",
                allow=[GoogleComputeFirewallAllow(protocol="tcp", ports=[str(cfg.vllm.port)])],
                source_ranges=list(cfg.network.allowed_cidrs),
                target_tags=[cfg.network_tag],
            )
        GoogleComputeFirewall(
            self,
            "allow-iap-ssh",
            name=f"{cfg.name}-allow-iap-ssh",
            network=cfg.network.network,
            direction="INGRESS",
            allow=[GoogleComputeFirewallAllow(protocol="tcp", ports=["22"])],
            source_ranges=[IAP_SSH_RANGE],
            target_tags=[cfg.network_tag],
        )

        endpoint = node.network_endpoints.get(0)
        ip = (
            endpoint.access_config.get(0).external_ip
            if cfg.network.enable_external_ip
            else endpoint.ip_address
        )
        TerraformOutput(self, "node_name", value=node.name)
        TerraformOutput(self, "zone", value=cfg.zone)
        TerraformOutput(self, "ip", value=ip)
        TerraformOutput(self, "endpoint", value=f"http://{ip}:{cfg.vllm.port}/v1")
