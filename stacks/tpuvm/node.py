"""The billing stack: the TPU node, its firewall rules and the outputs to reach it."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from cdktf import App, LocalExecProvisioner, TerraformOutput, TerraformResource, TerraformStack
from cdktf_cdktf_provider_google_beta.google_compute_firewall import (
    GoogleComputeFirewall,
    GoogleComputeFirewallAllow,
    GoogleComputeFirewallDeny,
)
from cdktf_cdktf_provider_google_beta.google_project_iam_member import (
    GoogleProjectIamMember,
    GoogleProjectIamMemberCondition,
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
from stacks.deadline_job import declare_deadline
from stacks.nat import cloud_nat
from stacks.watch import alerts
from tpudeploy import deadline
from tpudeploy.config import IAP_SSH_RANGE, DeployConfig
from tpudeploy.names import CLOUD_PLATFORM_SCOPE
from tpudeploy.platform import platform_for
from tpudeploy.render import node_metadata
from tpudeploy.tpuvm.addresses import IDLE_END_ID, NODE_SPEC_ID, QUEUED_RESOURCE_ID, VM_ID
from tpudeploy.tpuvm.deadline_target import node_url
from tpudeploy.tpuvm.flex import node_description, node_labels, queued_resource_spec

# The auto-created default network allows SSH from anywhere (default-allow-ssh) and everything
# from inside the VPC (default-allow-internal) at priority 65534. The node's own deny-all sits at
# a stronger priority (a lower number), and the node's allows above that.
DENY_ALL_PRIORITY = 65000
ALLOW_PRIORITY = 1000

REPO_ROOT = Path(__file__).resolve().parents[2]
QR_COMMAND = ".venv/bin/python -m tpudeploy.tpuvm.queued_resource"
# Stands in for the project id while the spec is built, then becomes var.project: the spec is
# validated in Python, but an unset project is only known when Terraform runs.
_PROJECT_PLACEHOLDER = "tpudeploy-project-placeholder"


def queued_resource_input(cfg: DeployConfig, project: str) -> str:
    """The spec JSON that the terraform_data resource carries, Terraform-escaped, with the project
    as a Terraform expression when it is not known at synth time."""
    literal = cfg.project or _PROJECT_PLACEHOLDER
    text = terraform_literal(queued_resource_spec(cfg, literal).to_json())
    return text if cfg.project else text.replace(_PROJECT_PLACEHOLDER, project)


class TpuNodeStack(TerraformStack):
    """Creates: the TPU v2 VM (spot or on-demand, with the Cloud Scheduler job deleting it at its
    deadline) or the flex-start queued resource running the seed's vLLM launch behind its TLS
    proxy; for the node's network tag a deny-all ingress rule per IP version, an allow for SSH
    from Google's IAP range and, only when allowed_cidrs is set, an allow for the proxy's port
    per IP version; for a private node (enable_external_ip = false) a Cloud Router and NAT."""

    def __init__(self, scope: Construct, id_: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id_)
        cfg = config
        project = configure(self, cfg)
        # Config strings reach Terraform arguments escaped: the config validates them against
        # GCE's grammar already, and a `${...}` that slipped through would be evaluated by
        # Terraform instead of reaching the API.
        labels = {k: terraform_literal(v) for k, v in node_labels(cfg).items()}
        network = terraform_literal(cfg.network.network)

        if cfg.provisioning == "flex-start":
            self._queued_resource(cfg, project)
        else:
            self._vm(cfg, project, labels)

        self._firewall(cfg, network)
        if platform_for(cfg).declares_nat(cfg) and not cfg.gitops_managed:
            # A pipeline deployment's router and NAT are the GitOps bootstrap's.
            cloud_nat(self, cfg)
        if not cfg.gitops_managed:  # its deploy identity holds no Monitoring permissions
            alerts(self, cfg, project)
        TerraformOutput(self, "node_name", value=cfg.node_id)
        TerraformOutput(self, "zone", value=cfg.zone)

    def _firewall(self, cfg: DeployConfig, network: str) -> None:
        """Deny everything to the node's tag, then allow IAP SSH and the proxy's port above it.
        A rule holds IPv4 or IPv6 ranges, never both (VPC firewall docs): one rule per version.
        Names come from the config (firewall_rule_names): the GitOps deploy identity may touch
        these rules and no others."""
        for rule, everything in (("deny-all", "0.0.0.0/0"), ("deny-all-v6", "::/0")):
            GoogleComputeFirewall(
                self,
                rule,
                name=cfg.firewall_rule_names[rule],
                network=network,
                direction="INGRESS",
                priority=DENY_ALL_PRIORITY,
                deny=[GoogleComputeFirewallDeny(protocol="all")],
                source_ranges=[everything],
                target_tags=[cfg.network_tag],
                description="Everything the rules above do not allow, whatever the network's "
                "own rules (default-allow-ssh, default-allow-internal) say.",
            )
        for rule, version in (("allow-api", 4), ("allow-api-v6", 6)):
            ranges = [
                c for c in cfg.network.allowed_cidrs if ipaddress.ip_network(c).version == version
            ]
            # Only with ranges: a GCE rule with no source ranges and no source tags means
            # 0.0.0.0/0, so an empty list must mean "no rule", never "an empty rule".
            if ranges:
                GoogleComputeFirewall(
                    self,
                    rule,
                    name=cfg.firewall_rule_names[rule],
                    network=network,
                    direction="INGRESS",
                    priority=ALLOW_PRIORITY,
                    allow=[GoogleComputeFirewallAllow(protocol="tcp", ports=[str(cfg.proxy.port)])],
                    source_ranges=ranges,
                    target_tags=[cfg.network_tag],
                )
        GoogleComputeFirewall(
            self,
            "allow-iap-ssh",
            name=cfg.firewall_rule_names["allow-iap-ssh"],
            network=network,
            direction="INGRESS",
            priority=ALLOW_PRIORITY,
            allow=[GoogleComputeFirewallAllow(protocol="tcp", ports=["22"])],
            source_ranges=[IAP_SSH_RANGE],
            target_tags=[cfg.network_tag],
        )

    def _vm(self, cfg: DeployConfig, project: str, labels: dict[str, str]) -> None:
        # google_tpu_v2_vm exists only in google-beta; the GA bindings have the legacy tpu_node.
        node = GoogleTpuV2Vm(
            self,
            VM_ID,
            name=cfg.node_id,
            zone=cfg.zone,
            accelerator_type=cfg.accelerator_type,
            runtime_version=cfg.runtime_version,
            description=terraform_literal(node_description(cfg)),
            scheduling_config=GoogleTpuV2VmSchedulingConfig(spot=True)
            if cfg.provisioning == "spot"
            else None,
            service_account=GoogleTpuV2VmServiceAccount(
                email=service_account_email(cfg, project), scope=[CLOUD_PLATFORM_SCOPE]
            ),
            network_config=GoogleTpuV2VmNetworkConfig(
                network=terraform_literal(cfg.network.network),
                subnetwork=terraform_literal(cfg.network.subnetwork) or None,
                enable_external_ips=cfg.network.enable_external_ip,
            ),
            shielded_instance_config=GoogleTpuV2VmShieldedInstanceConfig(enable_secure_boot=True),
            metadata={k: terraform_literal(v) for k, v in node_metadata(cfg).items()},
            tags=[cfg.network_tag],
            labels=labels,
        )

        # google-beta patches description, data_disks, metadata, tags and labels in place (PATCH
        # with an updateMask; resourceTpuV2VmUpdate in hashicorp/terraform-provider-google-beta,
        # google-beta/services/tpuv2/resource_tpu_v2_vm.go), and the guest agent runs the
        # startup script at boot only: a patched node keeps serving the old `vllm serve` line.
        # So what the boot reads (the metadata) replaces the node instead: a terraform_data
        # carries it and any change to it replaces the VM; `make diff` shows "will be replaced
        # due to changes in replace_triggered_by".
        fingerprint: dict[str, object] = {"metadata": node.metadata_input}
        if cfg.gitops_managed:
            # A deploy identity holds no tpu.nodes.update either: the TPU API cannot scope it to
            # one deployment's node, and rewriting another node's metadata (its startup script)
            # would run code as that node's account. Every field the API patches in place
            # replaces the node.
            fingerprint.update(
                description=node.description_input,
                labels=labels,
                tags=[cfg.network_tag],
                enable_external_ips=cfg.network.enable_external_ip,
            )
        spec = TerraformResource(self, NODE_SPEC_ID, terraform_resource_type="terraform_data")
        spec.add_override("input", fingerprint)
        node.add_override(
            "lifecycle.replace_triggered_by",
            [f"{spec.terraform_resource_type}.{spec.friendly_unique_id}"],
        )

        endpoint = node.network_endpoints.get(0)
        ip = (
            endpoint.access_config.get(0).external_ip
            if cfg.network.enable_external_ip
            else endpoint.ip_address
        )
        TerraformOutput(self, "ip", value=ip)
        # TLS with the node's own certificate: `make endpoint` prints the fingerprint to pin.
        TerraformOutput(self, "endpoint", value=f"https://{ip}:{cfg.proxy.port}/v1")
        # Spot and on-demand bill until deleted (build log): a deadline job deletes the node,
        # unless max_run_duration = "none" opted out.
        if cfg.deadline_seconds is not None:
            declare_deadline(
                self,
                cfg,
                project,
                cfg.deadline_seconds,
                what=f"TPU node {cfg.node_id}",
                uri=node_url(project, cfg.zone, cfg.node_id),
                # [idle] stop_after: the node deletes itself when idle (tpudeploy/node/idlewatch).
                self_stop_email=service_account_email(cfg, project)
                if cfg.idle.seconds is not None
                else "",
            )
        else:
            TerraformOutput(
                self,
                "billing",
                value=f"{cfg.provisioning}: nothing stops the billing but `make destroy` "
                '(max_run_duration = "none")',
            )

    def _queued_resource(self, cfg: DeployConfig, project: str) -> None:
        """Flex-start: Terraform's google_tpu_v2_queued_resource has no metadata, service account,
        provisioning model or run duration, so a terraform_data resource carries the spec and its
        create/destroy provisioners run the project's own v2alpha1 client. A changed spec
        replaces it (delete, then create)."""
        spec = queued_resource_input(cfg, project)
        environment = {"TPUDEPLOY_QR_SPEC": "${self.input}"}
        # local-exec runs in the stack's directory (cdktf.out/stacks/<stack>); the client and its
        # venv live at the repository root. Relative, so the JSON is the same on every machine.
        stack_dir = Path(App.of(self).outdir, "stacks", self.node.id).resolve()
        repo_root = os.path.relpath(REPO_ROOT, stack_dir)
        qr = TerraformResource(
            self,
            QUEUED_RESOURCE_ID,
            terraform_resource_type="terraform_data",
            provisioners=[
                LocalExecProvisioner(
                    type="local-exec",
                    command=f"{QR_COMMAND} create --timeout {cfg.flex_start_timeout_seconds}",
                    environment=environment,
                    working_dir=repo_root,
                ),
                LocalExecProvisioner(
                    type="local-exec",
                    when="destroy",
                    command=f"{QR_COMMAND} delete",
                    environment=environment,
                    working_dir=repo_root,
                ),
            ],
        )
        qr.add_override("input", spec)
        qr.add_override("triggers_replace", [spec])
        if cfg.idle.seconds is not None and not cfg.gitops_managed:
            self._idle_grant(cfg, project, qr)
        TerraformOutput(self, "queued_resource", value=cfg.queued_resource_id)
        TerraformOutput(
            self,
            "billing",
            value=f"flex-start: stops on its own after {cfg.max_run_duration} "
            "(or at `make destroy`); `make status` shows the node's IP and end time",
        )

    def _idle_grant(self, cfg: DeployConfig, project: str, qr: TerraformResource) -> None:
        """Flex-start with [idle] stop_after: the node's own account may delete queued resources
        (the stop role: tpudeploy/tpuvm/deadline_target.QR_STOP_PERMISSIONS) until its run's end
        plus deadline.GRANT_MARGIN, so the idle node deletes its queued resource and with it
        itself. Flex-start has no deadline job; the end is fixed like the spot deadline, once,
        here when the queued resource is created (it is ACTIVE by then, so its run ends no
        later than this plus max_run_duration), and renewed when the queued resource is created
        again (its id is unknown exactly then: stacks/deadline_job.py's measurement). Cloud TPU
        gives IAM conditions no resource name (tools/rehearsal/fakes/iamrules.py ATTRIBUTES), so
        the condition is the time alone: docs/security.md names the residual risk."""
        seconds = cfg.max_run_duration_seconds
        if seconds is None:  # refused by the config (a flex-start run needs an end)
            return
        end = TerraformResource(self, IDLE_END_ID, terraform_resource_type="terraform_data")
        end.add_override(
            "input",
            f'${{formatdate("{deadline.DEADLINE_FORMAT}", timeadd(timestamp(), "{seconds}s"))}}',
        )
        end.add_override("lifecycle.ignore_changes", ["input"])
        end.add_override(
            "triggers_replace", [f"${{{qr.terraform_resource_type}.{qr.friendly_unique_id}.id}}"]
        )
        at = f"{end.terraform_resource_type}.{end.friendly_unique_id}.output"
        GoogleProjectIamMember(
            self,
            deadline.IDLE_GRANT_ID,
            project=project,
            role=f"projects/{project}/roles/{cfg.stop_role_id}",
            member=f"serviceAccount:{service_account_email(cfg, project)}",
            condition=GoogleProjectIamMemberCondition(
                title="idle-stop-until-run-end",
                description=f"queued resource {cfg.queued_resource_id} deletes itself after "
                f"{cfg.idle.stop_after} idle, until its run's end + {deadline.GRANT_MARGIN}",
                expression=deadline.grant_expression(at),
            ),
        )
        TerraformOutput(self, "idle_grant_end", value=f"${{{at}}}")
