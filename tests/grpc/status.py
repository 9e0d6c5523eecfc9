"""Calls argos.common.v1.Daemon/Status on each Unix socket given, with Python's stock
gRPC client (PyPI grpcio), and prints one JSON object per socket.

Usage: status.py STUBS_DIR SOCKET...   (STUBS_DIR: grpc_tools.protoc's output for proto/)

On a Unix socket grpcio's default :authority is the percent-encoded socket path, which
an HTTP/2 server may refuse; like any client of Argos it names `localhost` instead.
"""
import json
import sys

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from argos.common.v1 import daemon_pb2, daemon_pb2_grpc  # noqa: E402

for socket in sys.argv[2:]:
    with grpc.insecure_channel(
        f"unix:{socket}", options=[("grpc.default_authority", "localhost")]
    ) as channel:
        stub = daemon_pb2_grpc.DaemonStub(channel)
        try:
            s = stub.Status(daemon_pb2.StatusRequest(), timeout=10)
            print(json.dumps({"socket": socket, "ok": True, "daemon": s.daemon,
                              "pid": s.pid, "uid": s.uid, "version": s.version}))
        except grpc.RpcError as e:
            print(json.dumps({"socket": socket, "ok": False, "code": e.code().name,
                              "message": e.details()}))
