"""The Python host-API client against real forgived daemons (a star fabric
of three hosts, started with forgivectl topo up): every operation, the
forgiven ranges of an incast, every error code the daemon can be made to
return, and the client's own failure modes."""

import fcntl
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from forgive import hostapi as h


@pytest.fixture
def clients(star3):
    cs = [h.Client(host.socket) for host in star3.hosts]
    yield cs
    for c in cs:
        c.close()


def pattern(n, seed):
    """Bytes 1..251, never 0, so a zero can only be a forgiven byte."""
    return ((np.arange(n, dtype=np.int64) * 7 + seed) % 251 + 1).astype(np.uint8)


# --- operations ----------------------------------------------------------------


def test_hello_reports_host_and_limits(star3, clients):
    for host, c in zip(star3.hosts, clients):
        assert c.info["version"] == h.VERSION
        assert c.host_id == host.host_id
        assert c.info["host_name"] == host.name
        assert c.limits["max_regions"] == 64
        assert c.limits["max_outstanding"] >= 1


def test_status_and_counters_account_this_client(clients):
    c = clients[0]
    r = c.register_memory(8192)
    c.create_flow(11, peer=2, cls="tensor")
    st = c.status()
    assert st["protocol"] == 1 and st["host_id"] == 1
    assert st["regions"] >= 1 and st["registered_bytes"] >= 8192 and st["flows"] >= 1
    assert st["backend"]["forgive"] == "true"
    cnt = c.counters()
    assert cnt["client"]["regions"] == 1
    assert cnt["client"]["registered_bytes"] == 8192
    assert cnt["client"]["flows"] == 1
    assert [f["flow"] for f in cnt["flows"]] == [11]
    assert h.counter_value(cnt["host"].get("flows_failed", 0)) == 0
    r.close()
    assert c.counters()["client"]["regions"] == 0


def test_send_and_receive_are_exact_through_the_fabric(clients):
    a, b = clients[1], clients[2]
    n = 300_000  # not a multiple of the MTU
    tx, rx = a.register_memory(n), b.register_memory(n + 4096)
    tx.array()[:] = pattern(n, 3)
    a.create_flow(21, peer=3, cls="pipeline")
    b.create_flow(21, peer=2, cls="pipeline")
    b.post_recv(21, rx, 4096, n, wr_id=7)
    a.post_send(21, tx, 0, n, wr_id=8)
    got = b.poll(timeout=30)
    sent = a.poll(timeout=30)
    # A pipeline flow has no steps: the receive was posted without one.
    assert (got.kind, got.status, got.wr_id, got.len, got.step, got.forgiven) == ("recv", "ok", 7, n, 0, ())
    assert (sent.kind, sent.status, sent.wr_id, sent.len) == ("send", "ok", 8, n)
    assert np.array_equal(rx.array(offset=4096, count=n), pattern(n, 3))
    assert not rx.array(count=4096).any(), "bytes outside the receive were written"


def test_incast_forgives_ranges_that_read_zero_within_the_budget(clients):
    """Two senders into one receiver over a 2:1 bottleneck trim; the
    receiver's completions list forgiven ranges, which are zeros in its
    memory, and everything else arrived intact."""
    rcv = clients[0]
    n = 1 << 20
    rx = rcv.register_memory(2 * n)
    step = 1001
    rcv.begin_step(step, expected_gradient_bytes=2 * n, critical=False)
    txs = []
    for i, snd in enumerate(clients[1:], start=1):
        tx = snd.register_memory(n)
        tx.array()[:] = pattern(n, i)
        txs.append(tx)
        snd.create_flow(300 + i, peer=rcv.host_id, cls="gradient")
        rcv.create_flow(300 + i, peer=snd.host_id, cls="gradient")
        rcv.post_recv(300 + i, rx, (i - 1) * n, n, step=step, wr_id=i)
    for i, (snd, tx) in enumerate(zip(clients[1:], txs), start=1):
        snd.post_send(300 + i, tx, 0, n, wr_id=100 + i)
    comps = {c.wr_id: c for c in (rcv.poll(timeout=60), rcv.poll(timeout=60))}
    for snd in clients[1:]:
        assert snd.poll(timeout=60).status == "ok"
    rcv.end_step(step)

    forgiven = 0
    mem = rx.array()
    for i in (1, 2):
        c = comps[i]
        assert c.status == "ok" and c.len == n and c.step == step
        got = mem[(i - 1) * n: i * n]
        lost = np.zeros(n, dtype=bool)
        for off, length in c.forgiven:
            assert 0 <= off and off + length <= n
            lost[off: off + length] = True
        assert not got[lost].any(), "a forgiven range is not zero-filled"
        assert np.array_equal(got[~lost], pattern(n, i)[~lost]), "a received byte is wrong"
        forgiven += c.forgiven_bytes
    rec = [s for s in rcv.steps() if s.step == step][0]
    assert rec.forgiven == forgiven, "completions and the ledger disagree on forgiven bytes"
    assert rec.trims > 0 and forgiven > 0, "the incast trimmed nothing: the test shows no forgiveness"
    assert rec.received + rec.forgiven == 2 * n
    assert rec.invariants() == []
    assert not rec.open and not rec.critical and rec.p == pytest.approx(0.1)
    assert h.sum_counter(rcv.counters(), "forgiven_bytes") >= forgiven


def test_steps_from_norms_are_classified_by_the_daemons_detector(clients):
    c = clients[1]
    c.begin_step(2001, expected_gradient_bytes=0, norms=[4.0, 2.0])  # first interval: critical
    c.begin_step(2002, expected_gradient_bytes=0, norms=[3.9, 2.1])  # a few percent: not
    c.begin_step(2003, expected_gradient_bytes=0, norms=[1.0, 2.1])  # one layer fell by 74 %
    c.begin_step(2004, expected_gradient_bytes=0, norms=[1.0, 2.1], lr_decay=True)
    for s in (2001, 2002, 2003, 2004):
        c.end_step(s)
    recs = {s.step: s for s in c.steps(limit=8)}
    assert [recs[s].critical for s in (2001, 2002, 2003, 2004)] == [True, False, True, True]
    assert recs[2002].p == pytest.approx(0.1) and recs[2001].p == pytest.approx(0.005)
    assert len(c.steps(limit=2)) == 2


def test_a_step_opened_before_its_classification(clients):
    """begin_step without critical or norms opens a step that counts as
    critical (P_low) until a second begin_step classifies it; nothing
    classifies it twice, and the expected bytes must match."""
    c = clients[1]
    c.begin_step(2101, expected_gradient_bytes=1000)
    rec = [s for s in c.steps() if s.step == 2101][0]
    assert rec.open and rec.classified is False and rec.critical and rec.p == pytest.approx(0.005)
    assert rec.budget == 5
    with pytest.raises(h.BackendError, match="opened expecting 1000"):
        c.begin_step(2101, expected_gradient_bytes=999, critical=False)
    c.begin_step(2101, expected_gradient_bytes=1000, critical=False)
    rec = [s for s in c.steps() if s.step == 2101][0]
    assert rec.classified and not rec.critical and rec.p == pytest.approx(0.1) and rec.budget == 100
    with pytest.raises(h.BackendError, match="already open"):
        c.begin_step(2101, expected_gradient_bytes=1000, critical=True)  # classified again
    with pytest.raises(h.BackendError, match="already open"):
        c.begin_step(2101, expected_gradient_bytes=1000)  # opened again
    c.end_step(2101)
    assert not [s for s in c.steps() if s.step == 2101][0].open


def test_bytes_before_their_step_opens_are_counted_unbudgeted(clients):
    """A gradient message that arrives for a step its receiver has not
    opened has no budget: the daemon delivers it and counts its bytes in
    the host counter and, once the step opens, in the step's record."""
    rcv, snd = clients[0], clients[2]
    n = 3 * 4096
    rx, tx = rcv.register_memory(n), snd.register_memory(n)
    tx.array()[:] = pattern(n, 7)
    snd.create_flow(81, peer=rcv.host_id, cls="gradient")
    rcv.create_flow(81, peer=snd.host_id, cls="gradient")
    before = rcv.counters()["host"]["unbudgeted_bytes"]
    rcv.post_recv(81, rx, 0, n, step=2201, wr_id=1, phase="reduce")
    snd.post_send(81, tx, 0, n, wr_id=2)
    assert snd.poll(timeout=60).ok
    comp = rcv.poll(timeout=60)
    assert comp.ok and comp.len == n and comp.forgiven == ()
    assert np.array_equal(rx.array(), tx.array())
    assert h.counter_value(rcv.counters()["host"]["unbudgeted_bytes"]) - h.counter_value(before) == n
    rcv.begin_step(2201, expected_gradient_bytes=n)
    rcv.begin_step(2201, expected_gradient_bytes=n, critical=False)
    rcv.end_step(2201)
    rec = [s for s in rcv.steps() if s.step == 2201][0]
    assert rec.unbudgeted_bytes == n and rec.received == n and rec.forgiven == 0
    assert rec.invariants() == []


def test_a_receive_names_its_phase_only_for_a_steps_gradient(clients):
    c = clients[0]
    r = c.register_memory(4096)
    c.create_flow(83, peer=clients[1].host_id, cls="gradient")
    c.create_flow(84, peer=clients[1].host_id, cls="other")
    for i, phase in enumerate(h.PHASES):
        c.post_recv(83, r, 0, 4096, step=2301, wr_id=10 + i, phase=phase)
    with pytest.raises(h.BadRequest, match="phase"):
        c.post_recv(83, r, 0, 4096, wr_id=20, phase="gather")  # no step
    with pytest.raises(h.BadRequest, match="phase"):
        c.post_recv(84, r, 0, 4096, step=2301, wr_id=21, phase="reduce")  # not a gradient flow
    with pytest.raises(h.BadRequest, match="phase"):
        c.call(h.OP_POST_RECV, {"flow": 83, "region": r.id, "offset": 0, "length": 4096, "step": 2301,
                                "wr_id": 22, "phase": "scatter"})
    with pytest.raises(ValueError, match="scatter"):
        c.post_recv(83, r, 0, 4096, step=2301, wr_id=23, phase="scatter")
    c.destroy_flow(83)  # fails the three receives posted
    for _ in h.PHASES:
        assert c.poll(timeout=10).status == "error"
    c.destroy_flow(84)


def test_destroying_a_flow_fails_its_outstanding_receive(clients):
    c = clients[0]
    r = c.register_memory(4096)
    c.create_flow(41, peer=2, cls="other")
    c.post_recv(41, r, 0, 4096, wr_id=99)
    c.destroy_flow(41)
    comp = c.poll(timeout=10)
    assert (comp.wr_id, comp.kind, comp.status) == (99, "recv", "error") and comp.err


def test_a_reply_longer_than_a_frame_is_reassembled(clients):
    """Counters of 200 flows exceed one 64 KiB frame: the daemon splits
    the reply (flag more) and the client joins it."""
    c = clients[2]
    for f in range(1, 201):
        c.create_flow(5000 + f, peer=1, cls="other")
    flags, body = c.wait_reply(c.send_frame(h.OP_COUNTERS))
    assert not flags & h.FLAG_ERROR
    assert len(body) > h.MAX_BODY, f"reply of {len(body)} bytes fits one frame: the test shows nothing"
    assert len(json.loads(body)["flows"]) == 200


def test_poll_times_out_and_try_poll_returns_none(clients):
    assert clients[0].try_poll() is None
    with pytest.raises(h.Timeout):
        clients[0].poll(timeout=0.05)
    assert clients[0].status()["protocol"] == 1  # still usable


def test_zero_copy_array_aliases_the_registered_memory(clients):
    r = clients[0].register_memory(4096)
    a = r.array("float32")
    a[:] = 1.5
    assert bytes(r.mem[:4]) == np.float32(1.5).tobytes()
    del a
    r.close()
    assert r.closed


# --- every error code ------------------------------------------------------------


def test_bad_request(clients):
    c = clients[0]
    with pytest.raises(h.BadRequest, match="unknown field"):
        c.call(h.OP_CREATE_FLOW, {"flow": 1, "peer": 2, "class": "gradient", "colour": "red"})
    with pytest.raises(h.BadRequest):
        c.call(h.OP_CREATE_FLOW, {"flow": 1, "peer": 2, "class": "bulk"})  # no such class
    with pytest.raises(h.BadRequest, match="critical or norms, not both"):
        c.call(h.OP_BEGIN_STEP, {"step": 1, "expected_gradient_bytes": 10, "critical": True, "norms": [1.0]})
    with pytest.raises(h.BadRequest, match="hello"):
        c.hello()  # a second hello
    for bad in ({"flags": h.FLAG_REPLY}, {"reserved": 1}):
        flags, body = c.wait_reply(c.send_frame(h.OP_STATUS, **bad))
        assert flags & h.FLAG_ERROR
        assert isinstance(h.error_from_body(body), h.BadRequest)
    assert c.status()["protocol"] == 1, "an error reply must leave the connection serving"


def test_unknown_op(clients):
    with pytest.raises(h.UnknownOp):
        clients[0].call(0x0D)


def test_unsupported_version(star3):
    with h.Client(star3.hosts[0].socket, hello=False) as c:
        with pytest.raises(h.UnsupportedVersion, match="daemon speaks"):
            c.hello(versions=[2, 3])
        req = c.send_frame(h.OP_HELLO, b'{"versions":[1]}', version=2)
        flags, body = c.wait_reply(req)
        assert flags & h.FLAG_ERROR
        with pytest.raises(h.UnsupportedVersion):
            raise h.error_from_body(body)


def test_hello_required(star3):
    with h.Client(star3.hosts[0].socket, hello=False) as c:
        with pytest.raises(h.HelloRequired):
            c.status()
        c.hello()
        assert c.status()["protocol"] == 1


def test_permission_denied(star3):
    """A uid the daemon does not admit (it runs as root with no allowed
    lists: root and its own uid only) is told so, then disconnected."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: the root group keeps the socket file reachable
        os.close(r)
        code = "none"
        try:
            os.setgid(0)
            os.setuid(65534)
            h.Client(star3.hosts[0].socket)
        except h.HostAPIError as e:
            code = e.code
        except BaseException as e:  # noqa: BLE001
            code = f"{type(e).__name__}: {e}"
        os.write(w, code.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = f.read().decode()
    os.waitpid(pid, 0)
    assert got == "permission_denied"


def test_no_such_region(clients):
    a, b = clients[0], clients[1]
    a.create_flow(51, peer=2, cls="other")
    with pytest.raises(h.NoSuchRegion):
        a.post_send(51, 999, 0, 16, wr_id=1)
    theirs = b.register_memory(4096)  # another client's id
    with pytest.raises(h.NoSuchRegion):
        a.call(h.OP_DEREGISTER_MEMORY, {"region": theirs.id})


def test_no_such_flow(clients):
    c = clients[0]
    r = c.register_memory(4096)
    with pytest.raises(h.NoSuchFlow):
        c.post_recv(61, r, 0, 16, wr_id=1)
    with pytest.raises(h.NoSuchFlow):
        c.destroy_flow(61)


def test_flow_exists(star3, clients):
    with h.Client(star3.hosts[0].socket) as other:
        clients[0].create_flow(71, peer=2, cls="gradient")
        with pytest.raises(h.FlowExists):
            other.create_flow(71, peer=3, cls="gradient")
        with pytest.raises(h.FlowExists):
            clients[0].create_flow(71, peer=2, cls="gradient")


def test_out_of_bounds(clients):
    c = clients[0]
    r = c.register_memory(4096)
    c.create_flow(81, peer=2, cls="other")
    with pytest.raises(h.OutOfBounds, match="exceeds"):
        c.post_send(81, r, 4000, 200, wr_id=1)
    with pytest.raises(h.OutOfBounds):
        c.post_send(81, r, 2**64 - 1, 2, wr_id=1)  # overflow-safe
    fd, mem = h.new_memfd(4096)  # a memfd shorter than the region it claims
    try:
        with pytest.raises(h.OutOfBounds):
            c.call(h.OP_REGISTER_MEMORY, {"length": 8192}, fds=[fd])
    finally:
        os.close(fd)
        mem.close()


def test_limit_exceeded(clients):
    c = clients[1]
    regions = [c.register_memory(4096) for _ in range(c.limits["max_regions"])]
    with pytest.raises(h.LimitExceeded, match="regions"):
        c.register_memory(4096)
    regions[0].close()
    c.register_memory(4096).close()  # a slot freed is usable again


def test_bad_fd(clients):
    c = clients[0]
    with pytest.raises(h.BadFD, match="exactly one"):
        c.call(h.OP_REGISTER_MEMORY, {"length": 4096})
    fd, mem = h.new_memfd(4096)
    try:
        with pytest.raises(h.BadFD, match="no descriptors"):
            c.call(h.OP_STATUS, fds=[fd])
        with pytest.raises(h.BadFD, match="exactly one"):
            c.call(h.OP_REGISTER_MEMORY, {"length": 4096}, fds=[fd, fd])
    finally:
        os.close(fd)
        mem.close()
    fd, mem = h.new_memfd(4096, seals=0)  # could shrink under the daemon
    try:
        with pytest.raises(h.BadFD, match="F_SEAL_SHRINK"):
            c.call(h.OP_REGISTER_MEMORY, {"length": 4096}, fds=[fd])
    finally:
        os.close(fd)
        mem.close()
    fd = os.memfd_create("sealed", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 4096)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_WRITE)
    try:
        with pytest.raises(h.BadFD, match="against writes"):
            c.call(h.OP_REGISTER_MEMORY, {"length": 4096}, fds=[fd])
    finally:
        os.close(fd)
    pr, pw = os.pipe()
    try:
        with pytest.raises(h.BadFD, match="not a memfd"):
            c.call(h.OP_REGISTER_MEMORY, {"length": 4096}, fds=[pr])
    finally:
        os.close(pr)
        os.close(pw)
    assert c.counters()["client"]["regions"] == 0


def test_backend(clients):
    """What the NIC refuses: a step begun twice, a region in use."""
    c = clients[2]
    c.begin_step(3001, expected_gradient_bytes=100, critical=True)
    with pytest.raises(h.BackendError, match="already open"):
        c.begin_step(3001, expected_gradient_bytes=100, critical=True)
    c.end_step(3001)
    with pytest.raises(h.BackendError, match="cannot begin again"):
        c.begin_step(3001, expected_gradient_bytes=100, critical=True)
    r = c.register_memory(4096)
    c.create_flow(91, peer=1, cls="other")
    c.post_recv(91, r, 0, 4096, wr_id=5)
    with pytest.raises(h.BackendError):
        r.close()


def test_internal_and_unknown_codes_map_to_exceptions():
    """No request makes a healthy daemon fail (internal), so this one code
    is checked on the decoder alone, with the codes a NIC adds."""
    e = h.error_from_body(b'{"code":"internal","message":"boom"}')
    assert isinstance(e, h.InternalError) and e.message == "boom"
    e = h.error_from_body(b'{"code":"no_such_step","message":"step 9"}')
    assert type(e) is h.NoSuchStep and e.code == "no_such_step"
    e = h.error_from_body(b'{"code":"a_new_code","message":"x"}')
    assert type(e) is h.HostAPIError and e.code == "a_new_code"
    assert isinstance(h.error_from_body(b"not json"), h.InternalError)
    assert set(h.ERRORS) == {
        "bad_request", "unknown_op", "unsupported_version", "hello_required", "permission_denied",
        "no_such_region", "no_such_flow", "flow_exists", "flow_reserved", "no_such_step", "out_of_bounds",
        "limit_exceeded", "bad_fd",
        "backend", "internal"}


# --- the command line ---------------------------------------------------------------


def test_the_module_prints_its_usage():
    r = subprocess.run([sys.executable, "-m", "forgive.hostapi", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: python3 -m forgive.hostapi")
    for word in ("--socket", "status", "counters", "steps"):
        assert word in r.stdout


def test_the_command_line_prints_the_daemons_replies(star3, capsys):
    host = star3.hosts[2]
    assert h.main(["--socket", host.socket, "status"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["protocol"] == 1 and st["host_id"] == host.host_id
    assert h.main(["--socket", host.socket, "counters"]) == 0
    assert "host" in json.loads(capsys.readouterr().out)
    with h.Client(host.socket) as c:  # a step for the ledger to report
        c.begin_step(4001, expected_gradient_bytes=0, critical=True)
        c.end_step(4001)
    assert h.main(["--socket", host.socket, "steps", "--limit", "1"]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert [r["step"] for r in recs] == [4001] and recs[0]["critical"] and not recs[0]["open"]
    assert h.StepRecord.from_json(recs[0]).invariants() == []


def test_the_command_line_reports_failures(star3, tmp_path, capsys):
    missing = str(tmp_path / "none.sock")
    assert h.main(["--socket", missing, "status"]) == 1
    assert missing in capsys.readouterr().err
    assert h.main(["--socket", star3.hosts[0].socket, "steps", "--limit", "5000"]) == 1
    assert "bad_request" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        h.main(["--socket", star3.hosts[0].socket, "nosuch"])
    assert e.value.code == 2


# --- the connection itself ------------------------------------------------------


def test_a_framing_error_closes_the_connection(star3):
    c = h.Client(star3.hosts[0].socket)
    c.send_frame(h.OP_STATUS, magic=b"XYZ")
    with pytest.raises(h.ConnectionLost):
        c.poll(timeout=10)
    assert c.closed
    with pytest.raises(h.ConnectionLost):
        c.status()


def test_closing_releases_everything(star3):
    c = h.Client(star3.hosts[1].socket)
    c.register_memory(1 << 16)
    c.create_flow(77, peer=1, cls="other")
    c.close()
    # The daemon releases what the client held once it sees the connection
    # end, which another connection's request may overtake: the id is free
    # again, at the latest after a few retries.
    with h.Client(star3.hosts[1].socket) as again:
        for attempt in range(600):
            try:
                again.create_flow(77, peer=1, cls="other")
                break
            except h.FlowExists:
                time.sleep(0.05)
        else:
            pytest.fail("flow 77 of a closed client was never released")
        assert [f["flow"] for f in again.counters()["flows"]] == [77]


def test_request_id_zero_is_refused(star3):
    with h.Client(star3.hosts[0].socket) as c:
        c.send_frame(h.OP_STATUS, req_id=0)
        with pytest.raises(h.BadRequest, match="request id 0"):
            c.poll(timeout=10)


def test_connecting_to_nothing_fails(tmp_path):
    with pytest.raises(FileNotFoundError):
        h.Client(str(tmp_path / "none.sock"))
