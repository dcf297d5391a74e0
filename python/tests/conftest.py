import os

import pytest

import forgive
from forgive import fabric


def pytest_report_header(config):
    # Which copy of the package runs: the installed one (CI) or python/.
    return f"forgive: {os.path.dirname(os.path.abspath(forgive.__file__))}"


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
