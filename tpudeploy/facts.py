"""The build log's measured facts, and Google's, each defined once with its source and date.

Plain data (standard library only: the GitOps helper runs it under a bare python3). Everything
that states one of these numbers imports it from here; tests/layout/test_one_home.py fails when a
module writes one of them again. README tables that show them are generated from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

GIB: Final = 1024**3

# ---- the source -------------------------------------------------------------------------------

SOURCE_TITLE: Final = "Self-hosting a lite agent backend on one TPU: Gemma 4 E2B + vLLM on a v5e-1"
SOURCE_URL: Final = (
    "https://dev.to/gde/self-hosting-a-lite-agent-backend-on-one-tpu-"
    "gemma-4-e2b-vllm-on-a-v5e-1-fk1"
)
PUBLISHED: Final = "2026-08-09"
SETUP: Final = (
    "v5litepod-1, us-west4-a, vllm/vllm-tpu:nightly (vLLM 0.26.1rc1.dev125+ga7a204cc6), "
    "google/gemma-4-E2B-it bf16, max-model-len 32768, max-num-batched-tokens 4096"
)

# ---- where and on what ------------------------------------------------------------------------

MODEL: Final = "google/gemma-4-E2B-it"
IMAGE: Final = "vllm/vllm-tpu:nightly"
# The TLS proxy's nginx: the newest stable release nginx's own history proves (nginx/nginx, tag
# release-1.30.4 of 2026-07-15, src/core/nginx.h NGINX_VERSION "1.30.4"; read 2026-12-01). The
# 1.30.5 this pinned before appears in no stored nginx release. The boot checks that the image's
# `nginx -v` says this version, so a tag that is not what it claims fails with the reason.
PROXY_NGINX_VERSION: Final = "1.30.4"
PROXY_IMAGE: Final = f"nginx:{PROXY_NGINX_VERSION}"
# The build log's zone: flex-start v5litepod-1 was verified there.
ZONE: Final = "us-west4-a"
ACCELERATOR_TYPE: Final = "v5litepod-1"

# Where flex-start was seen to work, per accelerator type: data, not scattered ifs. The build
# log verified us-west4-a on 2026-08-09; Google's documentation lists us-central1-a for v5e
# flex-start serving. europe-west4-a and -b refuse v5litepod-1 flex-start whatever the quota
# ("FLEX_START provisioning model is not supported for accelerator type").
FLEX_START_ZONES: Final[dict[str, dict[str, str]]] = {
    "v5litepod-1": {
        "us-west4-a": "build log, verified 2026-08-09 (the queued resource reached ACTIVE)",
        "us-central1-a": "Google Cloud TPU documentation, v5e flex-start serving",
    },
}
FLEX_START_REFUSED_ZONES: Final[dict[str, str]] = {
    "europe-west4-a": "refused at the API in the build log regardless of quota",
    "europe-west4-b": "refused at the API in the build log regardless of quota",
}


def flex_start_zones_text(accelerator_type: str) -> str:
    """The known-good flex-start zones of one accelerator type, for messages."""
    known = FLEX_START_ZONES.get(accelerator_type, {})
    return ", ".join(f"{zone} ({source})" for zone, source in known.items())


# Where Cloud TPU v5e exists at all, per generation, each zone with the page that lists it: a zone
# outside this list (a typo such as "us-wset4-a") is refused before any API call, since the TPU
# API would refuse it only at apply. Google's TPU regions-and-zones page, read 2026-12-01 in its
# stored copies (cloud.google.com/tpu/docs/regions-zones: North America lists us-central1-a,
# us-south1-a, us-west1-c, us-west4-a; the page's earlier and translated versions add the rest).
TPU_ZONES_SOURCE: Final = "cloud.google.com/tpu/docs/regions-zones (read 2026-12-01)"
TPU_ZONES: Final[dict[str, dict[str, str]]] = {
    "v5e": {
        "us-central1-a": "TPU regions and zones, North America",
        "us-south1-a": "TPU regions and zones, North America",
        "us-west1-c": "TPU regions and zones, North America",
        "us-west4-a": "TPU regions and zones, North America; the build log's zone",
        "us-west4-b": "TPU regions and zones (earlier version, 'Verfügbare Zonen')",
        "us-east5-a": "TPU regions and zones, single-tenant",
        "us-east5-b": "TPU regions and zones, single-tenant",
        "us-east5-c": "TPU regions and zones, single-tenant",
        "europe-west4-b": "TPU regions and zones (earlier version, Europe, v5lite-1)",
    },
}


# Google's IAP TCP-forwarding range: the only source SSH is opened to.
IAP_SSH_RANGE: Final = "35.235.240.0/20"

# Compute Engine's metadata server, metadata.google.internal: 169.254.169.254, and fd20:ce::254
# on a VM with IPv6 (https://cloud.google.com/compute/docs/metadata/querying-metadata). Its API
# is HTTP on TCP port 80, and it hands the VM's service-account token to any process that asks.
# The same address is the VM's DNS resolver (https://cloud.google.com/compute/docs/internal-dns),
# so the node blocks everything but DNS (port 53) to it for non-root processes.
METADATA_SERVER_ADDRESSES: Final = ("169.254.169.254", "fd20:ce::254")
METADATA_SERVER_DNS_PORT: Final = 53


@dataclass(frozen=True, slots=True)
class ChipSpec:
    """One TPU chip as the runtime sees it (build log, "spec | v5e, one chip" table)."""

    generation: str
    gcloud_prefix: str
    runtime_version: str
    machine_type: str
    hbm_bytes: int
    # Bytes per second. Google quotes v5e in GiBps and v6e in GBps: store bytes, never "GB".
    hbm_bandwidth_bytes_per_s: int
    peak_bf16_flops: float
    peak_int8_ops: float
    native_formats: frozenset[str]
    slice_chip_counts: tuple[int, ...]


V5E: Final = ChipSpec(
    generation="v5e",
    # v5e is spelled v5litepod to gcloud and the TPU API; "v5e-1" is never a valid argument.
    gcloud_prefix="v5litepod",
    runtime_version="v2-alpha-tpuv5-lite",
    machine_type="ct5lp-hightpu-1t",
    # 15.75 GiB is what the runtime reports; the "16 GB" vendor figure is not usable for sizing.
    hbm_bytes=round(15.75 * GIB),
    hbm_bandwidth_bytes_per_s=800 * GIB,
    peak_bf16_flops=197e12,
    peak_int8_ops=393e12,
    # fp8 and int4 widen back to bf16 before the MXU on v5e: storage only, no compute win.
    native_formats=frozenset({"bf16", "int8"}),
    slice_chip_counts=(1, 4, 8, 16, 32, 64, 128, 256),
)
# The chips this project carries data for, by gcloud prefix; their runtime is the only one that
# boots on them. Another generation is refused with one message naming these.
CHIPS: Final = MappingProxyType({V5E.gcloud_prefix: V5E})
# Prose spellings people type into CLI arguments.
PROSE_ALIASES: Final = MappingProxyType({"v5e": "v5litepod"})
_ACCELERATOR = re.compile(r"(?P<prefix>[a-z0-9]+)-(?P<count>[0-9]+)")


@dataclass(frozen=True, slots=True)
class Accelerator:
    accelerator_type: str
    chip: ChipSpec
    chips: int


class AcceleratorError(ValueError):
    """An accelerator type without chip data here; `reason` is the message without key = value."""

    def __init__(self, key: str, value: str, reason: str) -> None:
        self.reason = reason
        super().__init__(f"{key} = {value!r}: {reason}")


def lookup_accelerator(accelerator_type: str, *, key: str = "accelerator_type") -> Accelerator:
    """Parse e.g. "v5litepod-1" into its chip and chip count; the one place an accelerator type
    is judged, so every command refuses an unknown chip with the same message."""
    match = _ACCELERATOR.fullmatch(accelerator_type.strip().lower())
    known = ", ".join(f"{p}-N" for p in CHIPS)
    if match is None:
        raise AcceleratorError(
            key,
            accelerator_type,
            f"not '<generation>-<chips>' (known: {known}); use e.g. '{ACCELERATOR_TYPE}'",
        )
    prefix, count = match["prefix"], int(match["count"])
    if prefix in PROSE_ALIASES:
        fixed = f"{PROSE_ALIASES[prefix]}-{count}"
        raise AcceleratorError(
            key,
            accelerator_type,
            f"'{prefix}' is the prose name: gcloud and the TPU API spell it "
            f"'{PROSE_ALIASES[prefix]}' ('v5e-1' is fine in prose and never valid as an "
            f"argument); write {fixed!r}",
        )
    chip = CHIPS.get(prefix)
    if chip is None:
        raise AcceleratorError(
            key,
            accelerator_type,
            f"unknown TPU generation '{prefix}': this project carries chip data only for "
            f"{known} (v5e); use '{ACCELERATOR_TYPE}'",
        )
    if count not in chip.slice_chip_counts:
        sizes = ", ".join(f"{prefix}-{n}" for n in chip.slice_chip_counts)
        raise AcceleratorError(
            key,
            accelerator_type,
            f"{chip.generation} slices come as {sizes} only; use '{ACCELERATOR_TYPE}' (one chip)",
        )
    return Accelerator(accelerator_type=f"{prefix}-{count}", chip=chip, chips=count)


# ---- the model (build log, "E2B is a strange checkpoint" table) -------------------------------

# Field values of tpudeploy.config's ModelGeometry defaults; resident 8.97 GiB is measured.
GEMMA_4_E2B_GEOMETRY: Final = MappingProxyType(
    {
        "num_hidden_layers": 35,
        # Layer i is full attention when i % 5 == 4.
        "full_attention_every": 5,
        "full_attention_offset": 4,
        # The last 20 layers read another layer's cache: only 15 own one.
        "num_kv_shared_layers": 20,
        "num_attention_heads": 8,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "global_head_dim": 512,
        "hidden_size": 1536,
        "intermediate_size": 6144,
        "vocab_size": 262_144,
        "hidden_size_per_layer_input": 256,
        "sliding_window": 512,
        # text_config.max_position_embeddings of google/gemma-4-E2B-it's config.json
        # (https://huggingface.co/google/gemma-4-E2B-it/blob/main/config.json; the model card's
        # "128K" context): vLLM refuses a --max-model-len above it at boot, after billing began.
        "max_position_embeddings": 131_072,
        "param_bytes": 2,
        "kv_dtype_bytes": 2,
        "resident_weight_bytes": round(8.97 * GIB),
        # One figure, 2496, from vLLM's ValueError with {"image":4,"audio":1}; which modality
        # sets it is not recorded, so both carry it (refuses on the safe side).
        "mm_max_tokens_per_item": MappingProxyType({"image": 2496, "audio": 2496}),
    }
)

# ---- the tuned launch -------------------------------------------------------------------------

# 0.95 died 691 s into compile; 0.92 is the ceiling on v5e for this model, not a margin.
GPU_MEMORY_UTILIZATION_CEILING: Final = 0.92
MAX_MODEL_LEN: Final = 32_768
MAX_NUM_BATCHED_TOKENS: Final = 4096
# Measured single-stream TPOT at max-model-len 32768 (blocks/request table).
MEASURED_TPOT_S: Final = 8.02e-3
BLOCKS_PER_REQUEST: Final = 512

# ---- boot (final verification table) ----------------------------------------------------------

# "the 9.54 GiB checkpoint downloads in about 10 seconds" (into a RAM-backed HF_HOME).
CHECKPOINT_BYTES: Final = round(9.54 * GIB)

COLD_BOOT_S: Final = 857.0
COMPILE_S: Final = 685.0
# With ~/.cache/vllm mounted: the XLA compile cache survives the container.
WARM_BOOT_S: Final = 497.0

# ---- the KV pool ------------------------------------------------------------------------------

# The two open wins the build log says to re-check on every image bump: "Hybrid KV cache layout:
# num_kv_cache_groups=1" (sliding windows off; "windowing them would be worth 2.8x the KV
# capacity at 16K context") and int8 weights ("would roughly double the KV pool").
SLIDING_WINDOW_WIN_CONTEXT: Final = 16_384
SLIDING_WINDOW_WIN_RATIO: Final = 2.8

# "block_size 64 x 5,021 blocks = 321,344 tokens" (final configuration check table).
KV_POOL_TOKENS: Final = 321_344
# "Rule of thumb: keep clients x context < 250,000 tokens - about 78% of the 321,344-token pool."
SAFE_CLIENTS_X_CONTEXT: Final = 250_000
SAFE_POOL_FRACTION: Final = SAFE_CLIENTS_X_CONTEXT / KV_POOL_TOKENS

# ---- the benchmark sweep ----------------------------------------------------------------------

CONTEXTS: Final = (128, 1024, 8192)
CLIENTS: Final = (1, 4, 16, 64)
# "All 12 cells were measured ... 3 repetitions each (36 runs)."
REPETITIONS: Final = 3


def _grid(
    rows: tuple[tuple[float, float, float, float], ...],
) -> MappingProxyType[tuple[int, int], float]:
    return MappingProxyType(
        {
            (context, clients): value
            for context, row in zip(CONTEXTS, rows, strict=True)
            for clients, value in zip(CLIENTS, row, strict=True)
        }
    )


# Keys are (context tokens, concurrent clients). Values exactly as printed in the log's tables.
AGGREGATE_TOK_S: Final = _grid(
    (
        (123.7, 433.9, 1152.5, 1496.5),
        (120.4, 415.4, 991.0, 1258.7),
        (94.2, 254.4, 399.6, 324.3),
    )
)
MEDIAN_TTFT_MS: Final = _grid(
    (
        (15.9, 31.8, 98.8, 247.3),
        (40.3, 51.5, 170.1, 421.7),
        (289.4, 304.2, 594.4, 11734.0),
    )
)
PER_STREAM_TOK_S: Final = _grid(
    (
        (125.0, 112.0, 76.0, 25.0),
        (124.0, 109.0, 69.0, 21.0),
        (119.0, 71.0, 27.0, 10.0),
    )
)
# The log marks 128-ctx/16-client TTFT with '*': cv 56% across its repetitions.
UNTRUSTWORTHY_TTFT: Final = frozenset({(128, 16)})
# The rows of the log's $/M-token table: (label, context, clients); tok/s from AGGREGATE_TOK_S.
COST_TABLE_CELLS: Final = (
    ("128 ctx, 64 clients", 128, 64),
    ("1K ctx, 64 clients", 1024, 64),
    ("1K ctx, 16 clients", 1024, 16),
    ("8K ctx, 16 clients", 8192, 16),
    ("1 client (any ctx)", 128, 1),
)

# ---- prices -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PriceSheet:
    """$ per chip-hour by provisioning model in one region, with where and when they were read."""

    region: str
    per_chip_hour: MappingProxyType[str, float]
    as_of: str
    source: str


# Live Cloud Billing Catalog rates the build log read for us-west4 (its cost section). Regions
# not listed have no prices here: the cost commands refuse to estimate them (config [prices]).
PRICES: Final = MappingProxyType(
    {
        "us-west4": PriceSheet(
            region="us-west4",
            per_chip_hour=MappingProxyType(
                {
                    "spot": 0.5779,
                    "flex-start": 0.6000,
                    "on-demand": 1.2000,
                    "commit-1y": 0.8400,
                    "commit-3y": 0.5400,
                }
            ),
            as_of=PUBLISHED,
            source="Cloud Billing Catalog, us-west4 (build log, cost section)",
        ),
    }
)

# The build log's rates for the three provisioning models this project can create (a view of
# PRICES, for tables that compare against the log).
BUILD_LOG_RATES: Final = MappingProxyType(
    {m: PRICES["us-west4"].per_chip_hour[m] for m in ("spot", "flex-start", "on-demand")}
)

# ---- what the chip-hour rate leaves out ------------------------------------------------------

# "The JAX compile cache lives there (197 MB measured)": the size of one archive in the
# compile-cache bucket, which the long-lived stack keeps after `make destroy`.
COMPILE_CACHE_BYTES: Final = 197 * 10**6


@dataclass(frozen=True, slots=True)
class StoragePrice:
    """Cloud Storage Standard class, $ per GB-month in one region, with where it was read."""

    region: str
    per_gb_month: float
    as_of: str
    source: str


# Regional Standard storage; the compile-cache bucket lives in the deployment's region.
STORAGE_PRICES: Final = MappingProxyType(
    {
        "us-west4": StoragePrice(
            region="us-west4",
            per_gb_month=0.023,
            as_of="2022-12-30",
            source="cloud.google.com/storage/pricing, Standard storage, Las Vegas (us-west4), "
            "read from a web-archive copy of that date",
        ),
    }
)
# Cloud NAT, for a private node (enable_external_ip = false): a gateway charge per VM-hour (up
# to 32 VMs), the address it allocates itself (AUTO_ONLY) like any in-use external IPv4, and every
# GiB it processes, both ways. cloud.google.com/nat/pricing and cloud.google.com/vpc/network-pricing
# as transcribed on 2026-10-16 (a third-party copy of Google's pages; the pages themselves are not
# stored here): re-read them before trusting a bill.
CLOUD_NAT_PER_VM_HOUR: Final = 0.0014
CLOUD_NAT_ADDRESS_PER_HOUR: Final = 0.005
CLOUD_NAT_PER_GIB: Final = 0.045
CLOUD_NAT_AS_OF: Final = "2026-10-16"
# Every boot pulls the checkpoint (CHECKPOINT_BYTES, above) through the NAT on a private node.

# Secret Manager: $0.06 per active (enabled or disabled) secret version per location a month;
# the first six versions of a billing account are free (cloud.google.com/secret-manager/pricing).
SECRET_VERSION_PER_MONTH: Final = 0.06

# ---- GKE: the second platform (platform = "gke") ---------------------------------------------

# Zones with v5e (v5litepod) TPUs: https://cloud.google.com/tpu/docs/regions-zones (read
# 2026-12-01, "TPU type (v5e)": us-central1-a, us-south1-a, us-west1-c, us-west4-a). A GKE
# single-host v5e pool (ct5lp-hightpu-1t, topology 1x1) can only exist where the chip does.
GKE_TPU_SOURCE: Final = "cloud.google.com/tpu/docs/regions-zones, TPU type (v5e), read 2026-12-01"
GKE_V5E_ZONES: Final = ("us-central1-a", "us-south1-a", "us-west1-c", "us-west4-a")
# GKE flex-start for TPUs: "To run TPUs, use GKE version 1.33.0-gke.1712000 or later", v5e in
# us-west4-a (cloud.google.com/kubernetes-engine/docs/concepts/dws, read 2026-12-01).
GKE_FLEX_START_SOURCE: Final = (
    "cloud.google.com/kubernetes-engine/docs/concepts/dws, read 2026-12-01"
)
GKE_FLEX_START_V5E_ZONES: Final = ("us-west4-a",)
GKE_FLEX_START_TPU_MIN_VERSION: Final = "1.33.0-gke.1712000"
# "Custom ComputeClasses are available ... in GKE Standard mode in version 1.30.3-gke.1451000 and
# later" (cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes).
GKE_COMPUTE_CLASS_SOURCE: Final = (
    "cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes, read 2026-12-01"
)
GKE_COMPUTE_CLASS_MIN_VERSION: Final = "1.30.3-gke.1451000"
# The InferencePool (inference.networking.k8s.io/v1) exists on a cluster only as a CRD: "GKE
# automatically installs all GA CRDs for Gateway API and Gateway API Inference Extension on GKE
# versions 1.34.0-gke.1626000 or later" (llm-d's GKE guide and the inference extension's GKE
# guide, read 2026-12-02); before that, by hand, which this project does not do.
GKE_INFERENCE_CRDS_SOURCE: Final = (
    "llm-d docs/infra-providers/gke and gateway-api-inference-extension GKE guide, read 2026-12-02"
)
GKE_INFERENCE_CRDS_MIN_VERSION: Final = "1.34.0-gke.1626000"
# Flex-start VMs run at most seven days (same dws page; the TPU API's limit too).
GKE_FLEX_START_MAX_RUN_S: Final = 7 * 24 * 3600
# The node labels GKE sets on a v5e single-host node, which a pod selects with
# (cloud.google.com/kubernetes-engine/docs/how-to/tpus: tpu-v5-lite-podslice, 1x1).
GKE_TPU_ACCELERATOR_LABEL: Final = "tpu-v5-lite-podslice"
GKE_TPU_TOPOLOGY: Final = "1x1"
# Spot VMs get about 30 s of notice before preemption (build log: "preempted with ~30s notice";
# docs.cloud.google.com/kubernetes-engine/docs/concepts/spot-vms, "Termination and graceful
# shutdown of Spot VMs": the VM shuts down 30 s after the preemption notice).
SPOT_NOTICE_S: Final = 30
# Of those 30 s, GKE's graceful node shutdown gives non-system Pods the first 15 s (best effort)
# and system-critical Pods the last 15 s (same page; kubernetes-engine/docs/how-to/
# preemptible-vms: a terminationGracePeriodSeconds above 15 "has no effect" on a preemption).
# The window can be widened (up to 120 s) only by a node system configuration on control planes
# of 1.35.0-gke.1171000 or later, which the pinned google-beta bindings (16.12.1) do not expose:
# a replica's whole drain fits in these 15 s.
GKE_SPOT_POD_SHUTDOWN_S: Final = 15


@dataclass(frozen=True, slots=True)
class HourlyPrice:
    """One always-on item of a GKE deployment's idle floor, $ per hour, with where it was read."""

    item: str
    per_hour: float
    as_of: str
    source: str


# What a GKE deployment bills with no replica serving (the idle floor), us-west4. Rates read
# 2026-12-01 from the pages named; the system pool's rate was not confirmed in this session
# (no Google page for it was in reach) and is marked so ([prices] holds chip rates only).
GKE_IDLE_PRICES: Final = MappingProxyType(
    {
        "us-west4": (
            HourlyPrice(
                "cluster management fee (one zonal Standard cluster; GKE's free tier credits "
                "$74.40/month to one zonal cluster per billing account)",
                0.10,
                "2026-12-01",
                "cloud.google.com/kubernetes-engine/pricing",
            ),
            HourlyPrice(
                "Cloud NAT gateway (0.0014 per VM using it, per hour; one system node)",
                0.0014,
                "2026-12-01",
                "cloud.google.com/nat/pricing",
            ),
            HourlyPrice(
                "internal passthrough load balancer (first 5 forwarding rules)",
                0.025,
                "2026-12-01",
                "cloud.google.com/load-balancing/pricing",
            ),
        ),
    }
)
# $/hour of the system pool's machine, by region and type: not confirmed in this session.
SYSTEM_NODE_PRICES: Final = MappingProxyType(
    {
        ("us-west4", "e2-standard-2"): HourlyPrice(
            "system pool, one e2-standard-2 (UNCONFIRMED rate: check "
            "cloud.google.com/compute/vm-instance-pricing)",
            0.0755,
            "2026-12-01",
            "not confirmed here; cloud.google.com/compute/vm-instance-pricing",
        ),
    }
)
