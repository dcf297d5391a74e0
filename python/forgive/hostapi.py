"""A client of forgived's host API (docs/hostapi.md, protocol version 1).

Standard library only: a SOCK_SEQPACKET unix socket, sendmsg with
SCM_RIGHTS for memory registration, memfds mapped with mmap. numpy, when
installed, gives zero-copy views of registered memory (Region.array).

The client is synchronous and not thread-safe: one Client per thread.
Every call sends one request frame and reads frames until its reply;
completions pushed meanwhile are queued and returned by poll(), in the
order the daemon completed them.

    with Client("/run/forgive/t0xyz1/host1.sock") as c:
        region = c.register_memory(1 << 20)
        c.create_flow(7, peer=2, cls="gradient")
        c.begin_step(1, norms=[3.25, 0.5], expected_gradient_bytes=65536)
        c.post_recv(7, region, 0, 65536, step=1, wr_id=1)
        comp = c.poll(timeout=10)
        for off, length in comp.forgiven:    # zero-filled in region
            ...

Run as a program, it asks one daemon for its status, counters or step
records and prints the reply as JSON (`python3 -m forgive.hostapi --help`):

    python3 -m forgive.hostapi --socket /run/forgive/t0xyz1/host1.sock status
"""

from __future__ import annotations

import argparse
import array
import collections
import dataclasses
import errno
import fcntl
import json
import mmap
import os
import socket
import struct
import sys
import time
from typing import Any, Iterable, Optional, Sequence

VERSION = 1
HEADER = struct.Struct(">3sBBBHQ")  # magic, version, op, flags, reserved, id
HEADER_LEN = HEADER.size
MAGIC = b"FGV"
MAX_BODY = 64 << 10
MAX_FRAME = HEADER_LEN + MAX_BODY
MAX_MESSAGE = 64 << 20

FLAG_REPLY = 0x01
FLAG_ERROR = 0x02
FLAG_MORE = 0x04

# Operation codes (docs/hostapi.md, section 4).
OP_HELLO = 0x01
OP_REGISTER_MEMORY = 0x02
OP_DEREGISTER_MEMORY = 0x03
OP_CREATE_FLOW = 0x04
OP_DESTROY_FLOW = 0x05
OP_POST_SEND = 0x06
OP_POST_RECV = 0x07
OP_BEGIN_STEP = 0x08
OP_END_STEP = 0x09
OP_COUNTERS = 0x0A
OP_STEPS = 0x0B
OP_STATUS = 0x0C
OP_COMPLETION = 0x81

CLASSES = ("gradient", "tensor", "pipeline", "other")
ENTROPIES = ("single", "spray", "subflows", "message")  # in the daemon's order
PHASES = ("reduce", "gather", "gather-owner")  # what a gradient receive carries (post_recv's phase)

DEFAULT_TIMEOUT = 10.0
MAX_STEP_RECORDS = 1024
_MAX_FDS = 4  # as the daemon: descriptors one frame may carry


# --- errors ----------------------------------------------------------------


class HostAPIError(Exception):
    """An error reply from the daemon. `code` is the protocol's stable
    string; subclasses name each code of version 1. A code this client
    does not know (a NIC's own, such as no_such_step) arrives as a plain
    HostAPIError with that code."""

    code = ""

    def __init__(self, message: str = "", code: Optional[str] = None):
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(f"{self.code}: {message}" if message else self.code)


class BadRequest(HostAPIError):
    code = "bad_request"


class UnknownOp(HostAPIError):
    code = "unknown_op"


class UnsupportedVersion(HostAPIError):
    code = "unsupported_version"


class HelloRequired(HostAPIError):
    code = "hello_required"


class PermissionDenied(HostAPIError):
    code = "permission_denied"


class NoSuchRegion(HostAPIError):
    code = "no_such_region"


class NoSuchFlow(HostAPIError):
    code = "no_such_flow"


class FlowExists(HostAPIError):
    code = "flow_exists"


class FlowReserved(HostAPIError):
    code = "flow_reserved"


class NoSuchStep(HostAPIError):
    code = "no_such_step"


class OutOfBounds(HostAPIError):
    code = "out_of_bounds"


class LimitExceeded(HostAPIError):
    code = "limit_exceeded"


class BadFD(HostAPIError):
    code = "bad_fd"


class BackendError(HostAPIError):
    code = "backend"


class InternalError(HostAPIError):
    code = "internal"


ERRORS = {
    cls.code: cls
    for cls in (
        BadRequest,
        UnknownOp,
        UnsupportedVersion,
        HelloRequired,
        PermissionDenied,
        NoSuchRegion,
        NoSuchFlow,
        FlowExists,
        FlowReserved,
        NoSuchStep,
        OutOfBounds,
        LimitExceeded,
        BadFD,
        BackendError,
        InternalError,
    )
}


def error_from_body(body: bytes) -> HostAPIError:
    """The exception for an error reply's body {"code":..., "message":...}."""
    try:
        obj = json.loads(body or b"{}")
        code, message = obj["code"], obj.get("message", "")
        if not isinstance(code, str) or not code or not isinstance(message, str):
            raise ValueError("code and message must be strings")
    except (ValueError, KeyError, TypeError) as e:
        return InternalError(f"undecodable error reply {body[:200]!r}: {e}")
    cls = ERRORS.get(code)
    if cls is None:
        return HostAPIError(message, code=code)
    return cls(message)


class ClientError(Exception):
    """A failure on this side of the socket (never an error reply)."""


class ConnectionLost(ClientError):
    """The daemon connection ended; the client is unusable."""


class FramingError(ConnectionLost):
    """The daemon sent something that is not this protocol."""


class Timeout(ClientError):
    """A reply or completion did not arrive in time."""


# --- messages ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Completion:
    """One finished work request. `forgiven` lists (offset, length) ranges,
    relative to the receive's offset, that FORGIVE forgave: they read as
    zeros in the region."""

    wr_id: int
    kind: str  # "send" | "recv"
    flow: int
    status: str  # "ok" | "error"
    len: int
    step: int = 0
    err: str = ""
    forgiven: tuple = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def forgiven_bytes(self) -> int:
        return sum(n for _, n in self.forgiven)

    @classmethod
    def from_json(cls, obj: dict) -> "Completion":
        try:
            kind, status = obj["kind"], obj["status"]
            if kind not in ("send", "recv") or status not in ("ok", "error"):
                raise ValueError(f"kind {kind!r} status {status!r}")
            forgiven = tuple((int(r["off"]), int(r["len"])) for r in obj.get("forgiven") or ())
            return cls(
                wr_id=int(obj.get("wr_id", 0)),
                kind=kind,
                flow=int(obj.get("flow", 0)),
                status=status,
                len=int(obj.get("len", 0)),
                step=int(obj.get("step", 0)),
                err=str(obj.get("err", "")),
                forgiven=forgiven,
            )
        except (KeyError, TypeError, ValueError) as e:
            raise FramingError(f"bad completion {obj!r}: {e}") from None


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """One step as the receiving rank's loss-budget ledger saw it."""

    step: int
    critical: bool
    p: float
    expected: int
    budget: int
    received: int
    forgiven: int
    outstanding: int
    open: bool
    trimmed_bytes: int = 0
    trims: int = 0
    forgives: int = 0
    vesting_refusals: int = 0
    budget_refusals: int = 0
    draw_refusals: int = 0
    late_trims: int = 0
    invariant_held: bool = True
    # A daemon with gather policies and steps opened before their
    # classification adds these; None where it does not.
    classified: Optional[bool] = None  # false while an opened step waits for its classification
    unbudgeted_bytes: Optional[int] = None  # bytes of the step that arrived before it was opened
    gathered_forgiven: int = 0  # the part of forgiven that was a finished value (a "gather" receive)
    gather_repairs: int = 0  # trims of finished values the gather policy repaired
    gather_repair_bytes: int = 0

    @classmethod
    def from_json(cls, obj: dict) -> "StepRecord":
        # Lenient, as the protocol asks: a later daemon may add fields.
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in obj.items() if k in names})

    def invariants(self) -> list:
        """The FORGIVE invariants this record breaks, as sentences; empty
        when they hold: forgiven <= budget, forgiven <= p/(1-p) x received,
        and the daemon's own check (no range charged twice)."""
        broken = []
        if self.forgiven > self.budget:
            broken.append(f"step {self.step}: forgiven {self.forgiven} > budget {self.budget}")
        if self.p < 1 and self.forgiven * (1 - self.p) > self.p * self.received + 1e-6 * max(1, self.received):
            broken.append(
                f"step {self.step}: forgiven {self.forgiven} > p/(1-p) x received ({self.p} x {self.received})"
            )
        if not self.invariant_held:
            broken.append(f"step {self.step}: the daemon reports its invariant check failed")
        return broken


def counter_value(v: Any) -> int:
    """A counter's number whether the daemon sends it bare (42) or typed
    ({"value": 42, ...}); anything else is 0."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return int(v)
    if isinstance(v, dict) and isinstance(v.get("value"), (int, float)):
        return int(v["value"])
    return 0


def sum_counter(counters: dict, name: str) -> int:
    """Sums one named counter over the flows of a counters reply."""
    return sum(counter_value((f.get("values") or {}).get(name)) for f in counters.get("flows") or ())


# --- memory ------------------------------------------------------------------


class Region:
    """Registered memory: a sealed memfd mapped here and by the daemon.
    Sends read `mem`; receives write it; forgiven ranges read as zeros."""

    def __init__(self, client: "Client", region_id: int, mem: mmap.mmap):
        self.client = client
        self.id = region_id
        self.mem = mem
        self.closed = False

    def __len__(self) -> int:
        return len(self.mem)

    def view(self) -> memoryview:
        return memoryview(self.mem)

    def array(self, dtype="uint8", offset: int = 0, count: int = -1):
        """A numpy array over the region's bytes (no copy)."""
        import numpy as np

        return np.frombuffer(self.mem, dtype=dtype, count=count, offset=offset)

    def close(self) -> None:
        """Deregisters the region and unmaps it here (once no view of it
        is alive; until then the mapping stays with the views)."""
        if self.closed:
            return
        self.closed = True
        self.client._regions.discard(self)
        try:
            if not self.client.closed:
                self.client.call(OP_DEREGISTER_MEMORY, {"region": self.id})
        finally:
            _unmap(self.mem)


def _unmap(mem: mmap.mmap) -> None:
    try:
        mem.close()
    except BufferError:
        pass  # views still use it; the mapping goes with the last of them


def new_memfd(size: int, seals: Optional[int] = None) -> tuple:
    """A memfd of size bytes, mapped shared, sealed as the daemon requires
    (F_SEAL_SHRINK; the Go client adds GROW and SEAL, and so does this).
    Returns (fd, mmap); the caller closes the fd once it has been sent."""
    if size <= 0:
        raise ValueError(f"region size {size}, want > 0")
    fd = os.memfd_create("forgive-region", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        mem = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        if seals is None:
            seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        if seals:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        return fd, mem
    except BaseException:
        os.close(fd)
        raise


# --- client ------------------------------------------------------------------


class Client:
    """A connection to one forgived. See the module doc."""

    def __init__(self, path: str, name: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT,
                 hello: bool = True, job: Optional[str] = None):
        self.path = path
        self.timeout = timeout
        self.closed = False
        self.info: dict = {}
        self._next_id = 0
        self._queue: collections.deque = collections.deque()  # completions not yet polled
        self._replies: dict = {}  # id -> (flags, body) that arrived for another waiter
        self._partial: dict = {}  # id -> [op, flags, bytearray]
        self._abandoned: set = set()  # ids whose caller timed out
        self._regions: set = set()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(path)
            if hello:
                self.hello(name, job=job)
        except BaseException:
            self._sock.close()
            self.closed = True
            raise

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def fileno(self) -> int:
        return self._sock.fileno()

    # --- operations ---

    def hello(self, name: Optional[str] = None, versions: Sequence[int] = (VERSION,),
              job: Optional[str] = None) -> dict:
        """Says hello, declaring job (default: $FORGIVE_JOB, else none: the
        uid's default job; docs/hostapi.md, "Jobs and ownership")."""
        if name is None:
            name = f"{os.path.basename(sys.argv[0] or 'python')}[{os.getpid()}]"
        if job is None:
            job = os.environ.get("FORGIVE_JOB", "")
        body = {"versions": list(versions), "name": name.encode()[:64].decode(errors="ignore")}
        if job:
            body["job"] = job
        self.info = self.call(OP_HELLO, body)
        return self.info

    @property
    def host_id(self) -> int:
        return int(self.info.get("host_id", 0))

    @property
    def limits(self) -> dict:
        return self.info.get("limits", {})

    def register_memory(self, size: int) -> Region:
        fd, mem = new_memfd(size)
        try:
            rep = self.call(OP_REGISTER_MEMORY, {"length": size}, fds=[fd])
        except BaseException:
            _unmap(mem)
            raise
        finally:
            os.close(fd)  # the daemon has its own copy once the request is sent
        region = Region(self, int(rep["region"]), mem)
        self._regions.add(region)
        return region

    def deregister_memory(self, region: Region) -> None:
        region.close()

    def create_flow(self, flow: int, peer: int, cls: str = "gradient", entropy: str = "single",
                    subflows: int = 0) -> None:
        body = {"flow": flow, "peer": peer, "class": cls, "entropy": entropy}
        if subflows:
            body["subflows"] = subflows
        self.call(OP_CREATE_FLOW, body)

    def destroy_flow(self, flow: int) -> None:
        self.call(OP_DESTROY_FLOW, {"flow": flow})

    def post_send(self, flow: int, region: Any, offset: int, length: int, wr_id: int) -> None:
        self.call(OP_POST_SEND, {"flow": flow, "region": _region_id(region), "offset": offset,
                                 "length": length, "wr_id": wr_id})

    def post_recv(self, flow: int, region: Any, offset: int, length: int, *, wr_id: int,
                  step: Optional[int] = None, phase: Optional[str] = None) -> None:
        """Posts a receive into [offset, offset+length) of region. step tags
        a gradient message with its training step, for the ledger of that
        step; a flow of another class has no steps, so leave it out (the
        request then carries none, which the daemon reads as 0: no step,
        and nothing of the message is forgiven). phase says what a gradient
        message of a step carries: "reduce" (a partial sum, as in a ring's
        reduce-scatter) or "gather" (a finished value, as in its
        all-gather), or "gather-owner" (a finished value from the rank that
        finished it: the all-gather's first round), for the daemon's gather
        policy; absent, the daemon treats it as "reduce"."""
        body = {"flow": flow, "region": _region_id(region), "offset": offset, "length": length, "wr_id": wr_id}
        if step is not None:
            body["step"] = step
        if phase is not None:
            if phase not in PHASES:
                raise ValueError(f"phase {phase!r}: want one of {', '.join(PHASES)}")
            body["phase"] = phase
        self.call(OP_POST_RECV, body)

    def begin_step(self, step: int, expected_gradient_bytes: int, norms: Optional[Iterable[float]] = None,
                   critical: Optional[bool] = None, lr_decay: bool = False) -> None:
        """Declares a step before its gradient traffic: give norms (the
        daemon's detector classifies the step) or critical, not both. With
        neither, the call only opens the step's budget (the daemon counts
        the step as critical until it is classified); a second begin_step
        for the same step with norms or critical then classifies it."""
        body: dict = {"step": step, "expected_gradient_bytes": expected_gradient_bytes}
        if norms is not None:
            body["norms"] = [float(n) for n in norms]
        if critical is not None:
            body["critical"] = bool(critical)
        if lr_decay:
            body["lr_decay"] = True
        self.call(OP_BEGIN_STEP, body)

    def end_step(self, step: int) -> None:
        self.call(OP_END_STEP, {"step": step})

    def counters(self) -> dict:
        """The counters reply as decoded JSON: {"host": {...}, "flows":
        [{"flow", "peer", "values"}], "retired": {"flows", "all",
        "exempt", "reobeyed_flows"}, "client": {...}}; "retired" sums the
        counters of the flows this client destroyed (docs/hostapi.md).
        Read numbers with counter_value, which accepts bare and typed
        values."""
        return self.call(OP_COUNTERS)

    def steps(self, limit: int = 0) -> list:
        """The most recent step records (at most limit; 0: the daemon's
        default of 64), oldest first."""
        rep = self.call(OP_STEPS, {"limit": limit} if limit else None)
        return [StepRecord.from_json(s) for s in rep.get("steps") or ()]

    def status(self) -> dict:
        return self.call(OP_STATUS)

    def poll(self, timeout: Optional[float] = None) -> Completion:
        """The next completion, waiting up to timeout seconds (None: the
        client's timeout); Timeout when none arrives."""
        if self._queue:
            return self._queue.popleft()
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self._queue:
            self._read_frame(deadline)
        return self._queue.popleft()

    def try_poll(self) -> Optional[Completion]:
        """A completion if one is queued or already readable, else None."""
        while not self._queue:
            if not self._read_frame(time.monotonic(), block=False):
                return None
        return self._queue.popleft()

    def close(self) -> None:
        """Disconnects; the daemon releases every region and flow of this
        client. Regions are unmapped here too."""
        if self.closed:
            return
        self.closed = True
        self._sock.close()
        for r in list(self._regions):
            r.closed = True
            _unmap(r.mem)
        self._regions.clear()

    # --- frames ---

    def call(self, op: int, body: Any = None, fds: Sequence[int] = (), timeout: Optional[float] = None) -> Any:
        """Sends one request and returns its decoded reply body, raising the
        error reply's exception."""
        raw = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        if len(raw) > MAX_BODY:
            raise ValueError(f"request body of {len(raw)} bytes exceeds {MAX_BODY}")
        req_id = self.send_frame(op, raw, fds=fds)
        flags, reply = self.wait_reply(req_id, timeout)
        if flags & FLAG_ERROR:
            raise error_from_body(reply)
        if not reply:
            return {}
        try:
            return json.loads(reply)
        except ValueError as e:
            raise FramingError(f"undecodable reply to op 0x{op:02x}: {e}") from None

    def send_frame(self, op: int, body: bytes = b"", fds: Sequence[int] = (), version: int = VERSION,
                   flags: int = 0, reserved: int = 0, req_id: Optional[int] = None, magic: bytes = MAGIC) -> int:
        """Sends one raw frame and returns its request id. The keyword
        arguments exist to send what a well-behaved client never does."""
        self._check_open()
        if req_id is None:
            self._next_id += 1
            req_id = self._next_id
        frame = HEADER.pack(magic, version, op, flags, reserved, req_id) + body
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
        try:
            self._sock.sendmsg([frame], anc)
        except socket.timeout:
            raise Timeout(f"sending op 0x{op:02x} timed out") from None
        except OSError as e:
            if e.errno == errno.EPIPE:
                # The daemon closed its end; it may have said why first.
                self._drain_refusal()
            self._lost(f"send op 0x{op:02x}: {e}")
        return req_id

    def wait_reply(self, req_id: int, timeout: Optional[float] = None) -> tuple:
        """Reads frames until the reply to req_id: (flags, body)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        try:
            while req_id not in self._replies:
                self._read_frame(deadline)
        except Timeout:
            self._abandoned.add(req_id)  # a late reply is dropped
            raise
        return self._replies.pop(req_id)

    def _read_frame(self, deadline: float, block: bool = True) -> bool:
        """Reads and files one frame; False when none was readable."""
        self._check_open()
        wait = max(0.0, deadline - time.monotonic())
        try:
            self._sock.settimeout(wait if block else 0.0)
            data, anc, msg_flags, _ = self._sock.recvmsg(MAX_FRAME, socket.CMSG_SPACE(_MAX_FDS * 4))
        except (socket.timeout, BlockingIOError):
            if not block:
                return False
            raise Timeout(f"nothing from the daemon within {wait:.3g} s") from None
        except OSError as e:
            self._lost(f"read: {e}")
        finally:
            if not self.closed:
                self._sock.settimeout(self.timeout)
        for level, typ, payload in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                for fd in array.array("i", payload[: len(payload) - len(payload) % 4]):
                    os.close(fd)  # the daemon sends none
        if not data:
            self._lost("daemon closed the connection")
        if msg_flags & socket.MSG_TRUNC:
            self._lost(f"daemon frame longer than {MAX_FRAME} bytes", framing=True)
        self._file(data)
        return True

    def _file(self, frame: bytes) -> None:
        if len(frame) < HEADER_LEN:
            self._lost(f"frame of {len(frame)} bytes is shorter than the header", framing=True)
        magic, version, op, flags, _, req_id = HEADER.unpack_from(frame)
        if magic != MAGIC:
            self._lost(f"bad magic {magic!r}", framing=True)
        if version != VERSION:
            self._lost(f"daemon frame version {version}", framing=True)
        part = self._partial.get(req_id)
        if part is None:
            part = self._partial[req_id] = [op, flags & ~FLAG_MORE, bytearray()]
        elif part[0] != op:
            self._lost(f"frame of op 0x{op:02x} continues a message of op 0x{part[0]:02x}", framing=True)
        part[2] += frame[HEADER_LEN:]
        if len(part[2]) > MAX_MESSAGE:
            self._lost(f"daemon message exceeds {MAX_MESSAGE} bytes", framing=True)
        if flags & FLAG_MORE:
            return
        del self._partial[req_id]
        op, flags, body = part[0], part[1], bytes(part[2])
        if req_id == 0 and op == OP_COMPLETION:
            try:
                obj = json.loads(body)
            except ValueError as e:
                self._lost(f"undecodable completion: {e}", framing=True)
            self._queue.append(Completion.from_json(obj))
        elif req_id == 0 and flags & FLAG_ERROR:
            err = error_from_body(body)  # refused or dropped by the daemon
            self._close_sock()
            raise err
        elif req_id == 0:
            pass  # a push this version does not know
        elif req_id in self._abandoned:
            self._abandoned.discard(req_id)
        else:
            self._replies[req_id] = (flags, body)

    def _drain_refusal(self) -> None:
        """After EPIPE: reads what the daemon said before closing."""
        deadline = time.monotonic() + 1.0
        try:
            while True:
                self._read_frame(deadline)
        except HostAPIError as e:
            for req_id in list(self._replies):
                del self._replies[req_id]
            raise e
        except ClientError:
            pass

    def _check_open(self) -> None:
        if self.closed:
            raise ConnectionLost("client is closed")

    def _close_sock(self) -> None:
        if not self.closed:
            self.closed = True
            self._sock.close()

    def _lost(self, why: str, framing: bool = False):
        self._close_sock()
        raise (FramingError if framing else ConnectionLost)(why)


def _region_id(region: Any) -> int:
    return region.id if isinstance(region, Region) else int(region)


# --- command line ------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python3 -m forgive.hostapi` (or `forgive-hostapi`): one request to
    one daemon, its reply printed as JSON."""
    from . import prog

    p = argparse.ArgumentParser(
        prog=prog("forgive.hostapi"),
        description="Ask one forgived, over its host-API socket (docs/hostapi.md), for its status, its "
        "counters or its latest step records, and print the reply as JSON.",
        epilog="The socket is the `socket` of the daemon's configuration file (docs/forgived.md); "
        "forgivectl topo up --start prints one per host.")
    p.add_argument("--socket", required=True, help="the daemon's host-API socket, e.g. /run/forgive/ID/host1.sock")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds to wait for the reply")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("status", help="the daemon's identity, its backend and this connection's resources")
    sub.add_parser("counters", help="the host's counters and every flow's")
    steps = sub.add_parser("steps", help="the receiver ledger's latest step records, oldest first")
    steps.add_argument("--limit", type=int, default=0,
                       help=f"at most this many records (0: the daemon's default of 64; at most {MAX_STEP_RECORDS})")
    args = p.parse_args(argv)
    try:
        with Client(args.socket, name=p.prog, timeout=args.timeout) as c:
            if args.command == "status":
                out: Any = c.status()
            elif args.command == "counters":
                out = c.counters()
            else:
                out = [dataclasses.asdict(r) for r in c.steps(args.limit)]
    except HostAPIError as e:
        print(f"{p.prog}: {args.command}: the daemon refused: {e}", file=sys.stderr)
        return 1
    except (OSError, ClientError) as e:
        print(f"{p.prog}: {args.socket}: {e}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
