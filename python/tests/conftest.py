import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from forgive import fabric  # noqa: E402


def start_fabric(tmp_path_factory, topology, ranks, policy, profile="loopback"):
    """A real fabric for one test module, or a skip that says why."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the fabric runs in network namespaces (forgivectl topo up)")
    log = tmp_path_factory.mktemp("fabric") / "fabric.log"
    return fabric.Fabric(topology, ranks=ranks, policy=policy, profile=profile, log_path=str(log))


@pytest.fixture(scope="module")
def star3(tmp_path_factory):
    """Three hosts on one switch, every forgived configured with FORGIVE."""
    fab = start_fabric(tmp_path_factory, "star-8", 3, "forgive")
    yield fab
    alive = fab.alive()
    fab.stop()
    assert alive, "a daemon of the fabric died during the tests:\n" + fab.log_tail()
