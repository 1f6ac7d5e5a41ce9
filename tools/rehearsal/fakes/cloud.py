"""Every API fake on its own loopback port, all over one inventory."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from tools.rehearsal.fakes import EMULATOR_ENV
from tools.rehearsal.fakes.cloudscheduler import FakeCloudScheduler
from tools.rehearsal.fakes.compute import FakeCompute
from tools.rehearsal.fakes.container import FakeContainer
from tools.rehearsal.fakes.hfhub import FakeHub, Repo, running
from tools.rehearsal.fakes.iam import FakeIam
from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.k8s import FakeKubernetes
from tools.rehearsal.fakes.logging import FakeLogging
from tools.rehearsal.fakes.monitoring import FakeMonitoring
from tools.rehearsal.fakes.resourcemanager import FakeResourceManager
from tools.rehearsal.fakes.secretmanager import FakeSecretManager
from tools.rehearsal.fakes.serviceusage import FakeServiceUsage
from tools.rehearsal.fakes.storage import FakeStorage
from tools.rehearsal.fakes.tpu import FakeTpuApi
from tpudeploy import facts
from tpudeploy.config.speculative import DRAFTS
from tpudeploy.hfhub import FAKE_ENV as HFHUB_FAKE_ENV


class FakeCloud:
    """Every API fake on its own loopback port, all over one inventory."""

    def __init__(self) -> None:
        self.inventory = Inventory()
        inv = self.inventory
        # The rehearsal's node runs on this machine: its addresses are loopback. A queued
        # resource is ACTIVE at its first look and gone at the first look after its delete.
        self.tpu = FakeTpuApi(
            inventory=inv,
            node_ips=("127.0.0.1", "127.0.0.1"),
            create_states=["ACTIVE"],
            delete_polls=0,
        )
        self.secretmanager = FakeSecretManager(inv)
        self.storage = FakeStorage(inv)
        self.compute = FakeCompute(inv)
        self.iam = FakeIam(inv)
        self.serviceusage = FakeServiceUsage(inv)
        self.resourcemanager = FakeResourceManager(inv)
        self.monitoring = FakeMonitoring(inv)
        self.logging = FakeLogging(inv)
        # platform = "gke": the GKE API, and the Kubernetes API of the cluster it creates.
        self.kubernetes = FakeKubernetes(inv)
        self.container = FakeContainer(inv, self.kubernetes)
        # A deadline job's URL names tpu.googleapis.com or container.googleapis.com.
        self.cloudscheduler = FakeCloudScheduler(
            inv,
            targets={
                "tpu.googleapis.com": self.tpu.host,
                "container.googleapis.com": self.container.host,
            },
        )
        self.cloudscheduler.log_sink = self.logging.seed
        # make secret and make tune ask the Hugging Face Hub about the model and the drafts
        # (tpudeploy/hfhub.py): the model and every draft, gated as on the Hub; no token has
        # access until the rehearsal grants its own (hub_accepts), as accepting a licence would.
        self.hub = FakeHub(
            repos={
                repo: Repo({"config.json": 5_000, "model.safetensors": size}, "manual")
                for repo, size in (
                    (facts.MODEL, facts.CHECKPOINT_BYTES),
                    *((name, draft.bytes // 2) for name, draft in DRAFTS.items()),
                )
            }
        )
        self._hub_server = ExitStack()
        self._servers: list[Any] = [
            self.kubernetes,
            self.container,
            self.tpu,
            self.secretmanager,
            self.storage,
            self.compute,
            self.iam,
            self.serviceusage,
            self.cloudscheduler,
            self.resourcemanager,
            self.monitoring,
            self.logging,
        ]

    def __enter__(self) -> FakeCloud:
        for server in self._servers:
            server.start()
        self._hub_server.enter_context(running(self.hub))
        return self

    def __exit__(self, *exc: object) -> None:
        self._hub_server.close()
        for server in self._servers:
            server.stop()

    def hub_accepts(self, token: str) -> None:
        """The account behind `token` accepted the model's and every draft's licence."""
        self.hub.tokens[token] = set(self.hub.repos)

    def environment(self) -> dict[str, str]:
        """host:port of each API, under the variable its client reads."""
        return {
            EMULATOR_ENV["tpu"]: self.tpu.host,
            EMULATOR_ENV["secretmanager"]: self.secretmanager.host,
            EMULATOR_ENV["storage"]: self.storage.host,
            EMULATOR_ENV["compute"]: self.compute.host,
            EMULATOR_ENV["iam"]: self.iam.host,
            EMULATOR_ENV["serviceusage"]: self.serviceusage.host,
            EMULATOR_ENV["cloudscheduler"]: self.cloudscheduler.host,
            EMULATOR_ENV["cloudresourcemanager"]: self.resourcemanager.host,
            EMULATOR_ENV["container"]: self.container.host,
            EMULATOR_ENV["monitoring"]: self.monitoring.host,
            EMULATOR_ENV["logging"]: self.logging.host,
            HFHUB_FAKE_ENV: self.hub.host,
        }

    def billing(self) -> list[str]:
        """TPU nodes and queued resources that still exist."""
        return self.tpu.billing()

    def leftovers(self) -> list[str]:
        """Everything that still exists, enabled APIs aside: accounts, secrets, buckets,
        firewalls (the inventory) and TPU nodes or queued resources (the TPU fake)."""
        with self.inventory.locked() as inv:
            kept = sorted(key for key in inv.objects if "/operations/" not in key)
        return kept + self.billing()

    def mutations(self, since: int = 0) -> list[str]:
        """Changing requests (any API) logged after the first `since` calls."""
        with self.inventory.locked() as inv:
            return [f"{c.api} {c.method} {c.path}" for c in inv.calls[since:] if c.mutating]

    def call_count(self) -> int:
        with self.inventory.locked() as inv:
            return len(inv.calls)
