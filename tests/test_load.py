"""The load generator's binding (``_dynosim.send_load``, issue #11): columns back from a
small loopback server, config errors as EngineError, and a stop from another thread."""

import math
import socket
import threading

import pytest

from dynosim import _dynosim

COLUMNS = ["index", "client", "scheduled", "sent", "connected", "first_byte", "done",
           "status", "error", "bytes"]


def start_server(handle) -> str:
    """A server on 127.0.0.1:0 that calls handle(conn, head) on a thread per connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)

    def serve(conn):
        with conn:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                chunk = conn.recv(1)
                if not chunk:
                    return
                head += chunk
            handle(conn, head.decode())

    def accept():
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return f"127.0.0.1:{listener.getsockname()[1]}"


def echo(conn, head):
    path = head.split(" ")[1]
    tag = next((line.split(":", 1)[1].strip() for line in head.split("\r\n")
                if line.lower().startswith("x-tag:")), "")
    status = 500 if path == "/fail" else 200
    conn.sendall(f"HTTP/1.1 {status} X\r\nX-Path: {path}\r\nX-Tag: {tag}\r\n"
                 "Content-Length: 2\r\n\r\nok".encode())


def test_open_loop_columns():
    target = start_server(echo)
    requests = [(0.002 * i, f"/r{i}", {"X-Tag": f"t{i}"}) for i in range(10)]
    requests[3] = (requests[3][0], "/fail", {})
    out = _dynosim.send_load(target, requests, "open", timeout=10.0, deadline=30.0,
                             capture=["x-path", "X-Tag", "x-none"])
    n = len(requests)
    for key in COLUMNS:
        assert len(out[key]) == n, key
    assert out["index"] == list(range(n))
    assert out["stopped"] is None and out["unsent"] == 0
    assert out["status"] == [500 if i == 3 else 200 for i in range(n)]
    assert out["error"] == [None] * n
    assert out["headers"]["x-path"][0] == "/r0" and out["headers"]["x-path"][3] == "/fail"
    assert out["headers"]["X-Tag"][5] == "t5" and out["headers"]["X-Tag"][3] == ""
    assert out["headers"]["x-none"] == [None] * n
    for i in range(n):
        assert abs(out["scheduled"][i] - (out["start"] + requests[i][0])) < 1e-6
        moments = [out[k][i] for k in ("scheduled", "sent", "connected", "first_byte", "done")]
        assert all(a <= b + 1e-6 for a, b in zip(moments, moments[1:]))
    late = out["lateness"]
    assert late["count"] == n and 0 <= late["p50"] <= late["p99"] <= late["max"]


def test_closed_loop_and_refused():
    target = start_server(echo)
    out = _dynosim.send_load(target, [(0.0, "/", {})] * 6, "closed", clients=2,
                             think=[0.001] * 6)
    assert sorted(set(out["client"])) == [0, 1]
    assert out["status"] == [200] * 6
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    out = _dynosim.send_load(f"127.0.0.1:{port}", [(0.0, "/", {})], "open")
    assert out["error"] == ["refused"] and out["status"] == [0]
    assert math.isnan(out["connected"][0]) and math.isnan(out["done"][0])


@pytest.mark.parametrize("kwargs, path, fragment", [
    ({"target": "10.1.2.3:80"}, "target", "loopback"),
    ({"target": "localhost:80"}, "target", "127.0.0.1:8080"),
    ({"mode": "burst"}, "mode", "open"),
    ({"timeout": 0.0}, "timeout", "positive"),
    ({"deadline": float("nan")}, "deadline", "positive"),
    ({"mode": "closed", "clients": 0}, "", "client"),
    ({"requests": [(0.0, "no-slash", {})]}, "", "path"),
    ({"requests": [(0.0, "/", {"Bad Name": "x"})]}, "", "header"),
])
def test_bad_arguments_are_config_errors(kwargs, path, fragment):
    args = {"target": "127.0.0.1:9", "requests": [(0.0, "/", {})], **kwargs}
    with pytest.raises(_dynosim.EngineError) as info:
        _dynosim.send_load(**args)
    kind, where, message = info.value.args
    assert (kind, where) == ("config", path)
    assert fragment in message


def test_interrupt_stops_the_run():
    seen = threading.Event()

    def hang(conn, head):
        seen.set()
        threading.Event().wait(10)

    target = start_server(hang)

    def interrupt_when_seen():
        seen.wait(10)
        _dynosim.interrupt()

    threading.Thread(target=interrupt_when_seen, daemon=True).start()
    out = _dynosim.send_load(target, [(0.0, "/", {}), (100.0, "/", {})], "open",
                             timeout=60.0, deadline=60.0)
    assert out["stopped"] == "interrupted"
    assert out["error"] == ["interrupted"] and out["unsent"] == 1
