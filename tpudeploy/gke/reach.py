"""Who can reach a GKE deployment, as `make check` says it: the control plane (the Kubernetes
API the serving stack, `make status` and `make smoke` talk to) and the endpoint (the Service's
internal passthrough load balancer, or the Gateway's load balancer).

The control plane: GKE's network-isolation page (cloud.google.com/kubernetes-engine/docs/
concepts/network-isolation) says that without authorized networks the IP-based endpoint "can be
reachable from any external IP address ... subject to authentication and authorization"; with
them, only the listed IPv4 ranges connect. This project turns on authorized networks for every
IPv4 range of [network] allowed_cidrs (GKE takes IPv4 ranges only) and, with none, says who can
connect rather than locking the operator out of a cluster it must still reach to deploy.

The endpoint: "Internal passthrough Network Load Balancers make your cluster's Services
accessible to clients within your cluster's VPC network and to clients in networks connected to
your cluster's VPC network" (cloud.google.com/kubernetes-engine/docs/internal-load-balancing),
from the load balancer's region only unless the forwarding rule allows global access ("If false,
only allows access from the local region the load balancer is located at", Compute's
ForwardingRule.allowGlobalAccess). GKE sets it from the Service annotation below
(cloud.google.com/kubernetes-engine/docs/concepts/service-load-balancer-parameters, "Global
access"). Nothing on the internet reaches an internal load balancer, whatever allowed_cidrs says.
"""

from __future__ import annotations

from tpudeploy.config import DeployConfig
from tpudeploy.gke import routing
from tpudeploy.planner import Finding

# The Service annotation that allows clients in every region of the VPC (GKE's LoadBalancer
# Service parameters page, "Global access": internal passthrough load balancers only).
GLOBAL_ACCESS_ANNOTATION = "networking.gke.io/internal-load-balancer-allow-global-access"
GLOBAL_ACCESS_SOURCE = (
    "cloud.google.com/kubernetes-engine/docs/concepts/service-load-balancer-parameters"
)


def authorized_networks(cfg: DeployConfig) -> tuple[str, ...]:
    """The control plane's authorized networks: the IPv4 ranges of [network] allowed_cidrs
    (masterAuthorizedNetworksConfig.cidrBlocks takes IPv4 CIDR blocks only)."""
    return tuple(c for c in cfg.network.allowed_cidrs if ":" not in c)


def service_annotations(cfg: DeployConfig) -> dict[str, str]:
    """The Service's annotations: an internal passthrough load balancer, in every region of the
    VPC only when [gke] global_access says so."""
    annotations = {"networking.gke.io/load-balancer-type": "Internal"}
    if cfg.gke.global_access:
        annotations[GLOBAL_ACCESS_ANNOTATION] = "true"
    return annotations


def control_plane_line(cfg: DeployConfig) -> str:
    nets = authorized_networks(cfg)
    who = (
        f"only from {', '.join(nets)} (authorized networks)"
        if nets
        else "from ANY address (no authorized networks: [network] allowed_cidrs has no IPv4 range)"
    )
    return (
        f"control plane: the Kubernetes API of cluster {cfg.name} accepts connections {who}; "
        "each request still needs a Google identity with container permissions in the project "
        "and Kubernetes RBAC in the cluster"
    )


def service_clients(cfg: DeployConfig) -> str:
    """Who the Service's internal load balancer admits, in one phrase."""
    network, region = cfg.network.network, cfg.effective_region
    where = (
        f"clients in any region of VPC {network} ([gke] global_access)"
        if cfg.gke.global_access
        else f"clients in {region} of VPC {network} only (set [gke] global_access = true for its "
        "other regions)"
    )
    sources = (
        f", and of those only {', '.join(cfg.network.allowed_cidrs)} (loadBalancerSourceRanges)"
        if cfg.network.allowed_cidrs
        else ""
    )
    return f"{where}{sources}, or networks connected to it there (VPN, Interconnect, peering)"


def endpoint_line(cfg: DeployConfig) -> str:
    """Who reaches the replicas: the Service's internal load balancer (or the Gateway's)."""
    network, region = cfg.network.network, cfg.effective_region
    line = (
        f"endpoint: the Service's internal passthrough load balancer, port {cfg.proxy.port}: "
        f"{service_clients(cfg)}; nothing on the internet; each request needs the API key"
    )
    if cfg.routing.gateway:
        internal = routing.gateway_class(cfg) == routing.INTERNAL_CLASS
        line += f"; the Gateway ({routing.gateway_class(cfg)}): " + (
            f"clients in {region} of VPC {network}" if internal else "any internet address"
        )
    return line


def findings(cfg: DeployConfig) -> list[Finding]:
    """A control plane open to every address is GKE's default and the hardening guide's first
    item (authorized networks, or the DNS-based endpoint): warn, naming the fix."""
    if authorized_networks(cfg):
        return []
    return [
        Finding(
            "warning",
            "network.allowed_cidrs",
            list(cfg.network.allowed_cidrs),
            "the cluster's Kubernetes API accepts connections from any address (a request "
            "still needs a Google identity with container permissions and RBAC, but the API "
            "server is exposed to the internet). List your own IPv4 range, e.g. allowed_cidrs "
            '= ["203.0.113.7/32"], to admit only it as an authorized network (GKE hardening '
            "guide, cloud.google.com/kubernetes-engine/docs/how-to/hardening-your-cluster)",
        )
    ]
