#!/usr/bin/env python3
"""One client on one keep-alive connection, sequential requests: how much of each request's
time the server did not spend on it (the client's latency minus the server's own x-total-time,
which covers parsing, tokenizing, queueing and compute). A Nagle stall shows as ~40 ms there.
Usage: keepalive_latency.py PORT BODIES [N] [ROUTE]   (BODIES: one JSON body a line)"""
import http.client
import statistics
import sys
import time

port, bodies_path = int(sys.argv[1]), sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 300
route = sys.argv[4] if len(sys.argv) > 4 else "/predict"
bodies = [l for l in open(bodies_path).read().splitlines() if l]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
lat, server, compute = [], [], []
for i in range(n):
    t = time.perf_counter()
    c.request("POST", route, body=bodies[i % len(bodies)], headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    lat.append((time.perf_counter() - t) * 1e3)
    assert r.status == 200, r.status
    server.append(float(r.getheader("x-total-time")))
    compute.append(float(r.getheader("x-inference-time")))
c.close()
gap = [a - b for a, b in zip(lat, server)]
q = lambda v, p: sorted(v)[min(len(v) - 1, int(p * len(v)))]
print(f"requests={n} client_p50_ms={statistics.median(lat):.3f} client_p99_ms={q(lat, .99):.3f} "
      f"server_p50_ms={statistics.median(server):.3f} compute_p50_ms={statistics.median(compute):.3f} "
      f"outside_server_p50_ms={statistics.median(gap):.3f} outside_server_p99_ms={q(gap, .99):.3f} "
      f"requests_per_s={n / (sum(lat) / 1e3):.1f}")
