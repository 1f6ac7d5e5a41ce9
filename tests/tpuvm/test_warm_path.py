"""The warm path: a spot node recreated after a preemption finds its predecessor's compile cache.

Two fake TPU VMs boot the rendered startup script under bash, one after the other, on fresh
disks; the bucket (the secrets stack's, which outlives every node) is the only thing they share.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

from tests.boot_sandbox import PROJECT, Node
from tpudeploy import planner
from tpudeploy.config import parse_config
from tpudeploy.render import compile_cache_key, render_startup_script

COMPILED = ["jit_decode-cache", "jit_prefill-cache"]


def test_a_recreated_spot_node_boots_warm_from_its_predecessors_cache(tmp_path: Path) -> None:
    cfg = parse_config({"project": PROJECT, "provisioning": "spot"})
    first = Node(tmp_path / "first", cfg, compiles=COMPILED)
    boot = first.run()
    assert boot.returncode == 0, boot.stderr
    saved = first.cache_object()
    assert saved.is_file(), "the first node saved the compiled programs"
    with tarfile.open(saved) as tar:
        assert {f"./xla_cache/{name}" for name in COMPILED} <= set(tar.getnames())

    # The replacement: the same spec (make recover replaces with the same config), a new disk.
    # Its engine compiles nothing: whatever is in its cache came from the archive.
    second = Node(tmp_path / "second", cfg, compiles=[])
    assert render_startup_script(cfg) == (second.scripts / "startup.sh").read_text()
    shutil.copytree(first.stub_dir / "gcs", second.stub_dir / "gcs")
    assert not second.cache_dir.exists()
    boot = second.run()
    assert boot.returncode == 0, boot.stderr
    for name in COMPILED:
        restored = second.cache_dir / "xla_cache" / name
        assert restored.read_bytes() == (first.cache_dir / "xla_cache" / name).read_bytes()
    # Warm: it read the archive and uploaded nothing (the key already holds one).
    assert [c for c in second.calls("curl") if (c.get("url") or "").endswith(saved.name)]
    assert not [c for c in second.calls("curl") if "--upload-file" in c["argv"]]
    second.assert_no_secret_leaked(boot)


def test_the_cache_key_does_not_depend_on_the_provisioning_model() -> None:
    """A preempted spot node's cache also serves an on-demand or flex-start node of the same
    serving config: the key covers what XLA compiles, not how the VM was bought."""
    keys = {
        compile_cache_key(parse_config({"provisioning": model}))
        for model in ("spot", "on-demand", "flex-start")
    }
    assert len(keys) == 1
    assert compile_cache_key(parse_config({"vllm": {"max_model_len": 16384}})) not in keys


def test_the_break_even_uses_the_warm_boot_when_the_cache_exists() -> None:
    warm, cold = planner.preemption_line(warm=True), planner.preemption_line(warm=False)
    # The build log: 497 s warm ($0.0798 at spot), 857 s cold ($0.1376); 3.6 h vs 6.2 h.
    assert "497 s" in warm and "$0.0798" in warm and "3.6 h" in warm
    assert "857 s" in cold and "$0.1376" in cold and "6.2 h" in cold
