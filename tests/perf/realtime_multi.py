"""bench_realtime's multi-process phase (issue 30): routed badge events over several web processes (nodes).

    python -m tests.perf.bench_realtime --phase multi [--processes 4] [--multi-sockets 2500]
                                        [--multi-step 500] [--multi-rate 100] [--multi-duration 20]

--processes real gunicorn web processes (app.realtime.gunicorn_conf, WEB_WORKERS=1, WEB_MAX_SOCKETS sized
for their sockets), each holding --multi-sockets signed-in sockets, opened in steps of --multi-step per
process until the target or the first handshake error. One client process per web process (the Clients
of bench_realtime, in its own asyncio loop) acks every frame, as a browser tab does. Then this process
publishes badge events for random connected users through the real path (app.live.publish.route_badge:
one registry lookup, one message on the node channel of the process holding the user, "t" = the accepted
time) at --multi-rate for --multi-duration seconds, and reads each node's counters (app/live/nodestats.py).

- inbound share: a node's inbound events / (events published / processes); before routing every process
  heard every event (share = processes). The baseline is measured in the same run: a bare subscriber on
  every node channel is a process that hears every event.
- ack: from the accepted time to the client's ack of the frame showing the event (client side, epoch
  clock), cross-checked against the nodes' 202-to-ack histogram; "floor" is the same events' arrival at
  the bare subscriber (what Redis and this machine add).
- ack rate: acks / frames, the nodes' counters (greetings included, as /metrics shows them).
- RSS per socket: each web process's RSS growth since before its first socket / its sockets.
- Before the events, the same length of time with the sockets open and no event: the web processes' CPU
  for heartbeats, pings and their acks alone. Each process's heartbeat pings every socket that has been
  quiet for a third of PRESENCE_TTL_SECONDS in one pass, so the acks come back in bursts; the events are
  split by whether their process's client read a burst of pings within a second of them.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import multiprocessing
import os
import queue
import random
import time

import psutil
import redis as redis_lib

from app import keyspace
from app.live import nodestats, registry
from tests.perf.bench_realtime import (
    NODE_TTL_SECONDS,
    SETTLE_SECONDS,
    Clients,
    RedisFloor,
    bench_env,
    free_port,
    latency_stats,
    prepare_database,
    rss_kb,
)

COMMAND_TIMEOUT = 900.0  # a client process left without orders (the bench died) closes its sockets and exits
STEP_TIMEOUT = 300.0
STOP_TIMEOUT = 60.0
NODE_DB_POOL = "5"  # per web process: 4 processes share the machine's PostgreSQL (100 connections) with others
EVENT_FIRST_SEQ = 3_000_000
PING_BURST_MIN = 50  # pings to one process's sockets within 2 s that make a burst (5 % of them when more)
WINDOW_COUNTERS = ("inbound_messages", "inbound_events", "frames", "acks", "resends", "unacked")


def client_process(base_url: str, cookies: dict[int, str], commands, replies) -> None:
    """Hold one web process's sockets in an asyncio loop; obey "open N", "report" and "close" from the bench."""
    asyncio.run(_client_loop(base_url, cookies, commands, replies))


async def _client_loop(base_url: str, cookies: dict[int, str], commands, replies) -> None:
    clients = Clients(base_url, cookies, None)  # /ws declines permessage-deflate anyway
    order = list(cookies)
    loop = asyncio.get_running_loop()
    try:
        while True:
            try:
                command, arg = await loop.run_in_executor(None, commands.get, True, COMMAND_TIMEOUT)
            except queue.Empty:
                return
            if command == "open":
                start = len(clients.sockets) + len(clients.errors)
                started = time.perf_counter()
                await clients.open(order[start : start + arg])
                replies.put(
                    ("opened", list(clients.sockets), len(clients.errors), clients.errors[:1],
                     time.perf_counter() - started)
                )  # fmt: skip
            elif command == "report":
                replies.put(
                    ("report", dict(clients.acked), clients.frames, clients.acks_sent, len(clients.closed),
                     list(clients.pings))
                )  # fmt: skip
            elif command == "close":
                return
    finally:
        await clients.close()
        replies.put(("closed", None))


class ClientProcess:
    """A client_process and its two queues."""

    def __init__(self, spawn, base_url: str, cookies: dict[int, str]) -> None:
        self.commands, self.replies = spawn.Queue(), spawn.Queue()
        self.proc = spawn.Process(
            target=client_process, args=(base_url, cookies, self.commands, self.replies), daemon=True
        )
        self.proc.start()

    def ask(self, command: str, arg=None, timeout: float = STEP_TIMEOUT):
        self.commands.put((command, arg))
        return self.reply(timeout)

    def reply(self, timeout: float):
        try:
            return self.replies.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"client process {self.proc.pid} did not answer within {timeout:g} s") from None

    def stop(self) -> None:
        if self.proc.is_alive():
            self.commands.put(("close", None))
            with contextlib.suppress(RuntimeError):
                self.reply(STOP_TIMEOUT)
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()


def cpu_s(pid: int) -> float:
    """Return the user + system CPU seconds pid has used."""
    return sum(psutil.Process(pid).cpu_times()[:2])


def node_counters(client, namespace: dict) -> dict[str, dict[str, float]]:
    """Return node id -> its counters in Redis (app/live/nodestats.py), for the live nodes."""
    return nodestats.read(client, registry.live_nodes(client, NODE_TTL_SECONDS, config=namespace), config=namespace)


def histogram_p99_bucket(counts: dict[str, float]) -> float | None:
    """Return the upper bound (s) of the histogram bucket that holds the 99th percentile (None: above them all)."""
    total = counts.get("ack_count", 0)
    for bound in nodestats.ACK_BUCKETS:
        if total and counts.get(f"ack_le_{bound}", 0) >= 0.99 * total:
            return bound
    return None


def publish_events(app, users: list[int], rate: float, duration: float) -> tuple[dict[int, float], dict, int]:
    """Publish a badge event for a random user per tick through route_badge, as the API's commit does.

    Returns (seq -> accepted time, epoch; seq -> user; events that reached no node).
    """
    from app.live.publish import route_badge

    rng = random.Random(30)
    accepted: dict[int, float] = {}
    chosen: dict[int, int] = {}
    unrouted = 0
    begin = time.perf_counter()
    with app.app_context():
        for n in range(int(rate * duration)):
            delay = begin + n / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            seq, user_id = EVENT_FIRST_SEQ + n, rng.choice(users)
            at = time.time()  # what badge_after_commit stamps as the accepted time
            reached = route_badge([user_id], {"title": f"bench-{seq}"}, accepted_at=at)
            accepted[seq], chosen[seq] = at, user_id
            unrouted += not reached
    return accepted, chosen, unrouted


def run_multi(args) -> dict:
    """Start the web processes, open the sockets in steps, publish, read the counters; return the figures."""
    from tests.realtime.helpers import Gunicorn, session_cookie

    processes, per_node = args.processes, args.multi_sockets
    env = bench_env(args.malloc_tcache)
    app, users, _ = prepare_database(env, processes * per_node)
    user_ids = list(users)
    cookies = {user_id: session_cookie(app, user_id) for user_id in user_ids}
    namespace = {"REDIS_NAMESPACE": keyspace.derive_namespace(env["DATABASE_URL"])}
    store = redis_lib.Redis.from_url(env["REDIS_URL"])
    log_dir = os.environ.get("BENCH_LOG_DIR", "/tmp")
    servers = []
    clients: list[ClientProcess] = []
    spawn = multiprocessing.get_context("spawn")
    try:
        for k in range(processes):
            node_env = {**env, "DB_POOL_SIZE": NODE_DB_POOL, "REALTIME_NODE_ID": f"bench{k}"}
            servers.append(
                Gunicorn(free_port(), sockets=per_node + 64, env=node_env,
                         log_path=f"{log_dir}/bench_realtime_multi_{k}.log").start()
            )  # fmt: skip
        workers = [server.worker_pids()[0] for server in servers]
        asyncio.run(_warm([server.base_url for server in servers], cookies, user_ids))
        time.sleep(1.0)
        base_rss = [rss_kb(pid) for pid in workers]
        shares = [user_ids[k::processes][:per_node] for k in range(processes)]
        clients = [
            ClientProcess(spawn, server.base_url, {u: cookies[u] for u in share})
            for server, share in zip(servers, shares, strict=True)
        ]
        steps, connected, first_error = _open_in_steps(clients, workers, base_rss, per_node, args.multi_step)
        time.sleep(nodestats.FLUSH_SECONDS + 0.5)  # the greetings' acks reach the counters
        rss_now = [rss_kb(pid) for pid in workers]
        # As long without events first: what the open sockets cost by themselves (heartbeats, pings, acks).
        cpu_quiet = [cpu_s(pid) for pid in workers] + [cpu_s(c.proc.pid) for c in clients]
        quiet_window = (time.time(), time.time() + args.multi_duration)
        time.sleep(args.multi_duration)
        before = node_counters(store, namespace)
        floor = RedisFloor(env["REDIS_URL"], env["DATABASE_URL"], clock=time.time)
        floor.start()
        load = os.getloadavg()[0]
        cpu_before = [cpu_s(pid) for pid in workers] + [cpu_s(c.proc.pid) for c in clients]
        live = sorted(u for ids in connected for u in ids)
        if not live:
            raise RuntimeError(f"no socket opened: {first_error}")
        accepted, chosen, unrouted = publish_events(app, live, args.multi_rate, args.multi_duration)
        time.sleep(SETTLE_SECONDS + nodestats.FLUSH_SECONDS + 0.5)  # last acks, then their flush
        cpu_after = [cpu_s(pid) for pid in workers] + [cpu_s(c.proc.pid) for c in clients]
        after = node_counters(store, namespace)
        floor.stop.set()
        floor.join(2)
        reports = [client.ask("report") for client in clients]
    finally:
        for client in clients:
            client.stop()
        for server in servers:
            server.stop()
            server.kill()
    acked: dict[int, float] = {}
    for _, acks, *_ in reports:
        acked.update(acks)
    result = summarize(
        args, servers, shares, connected, steps, first_error, base_rss, rss_now, before, after, floor, accepted,
        acked, unrouted, reports, cpu_before, cpu_after, load,
    )  # fmt: skip
    quiet_cpu = [b - q for b, q in zip(cpu_before, cpu_quiet, strict=True)]
    result.update(
        quiet_web_cpu_s=round(sum(quiet_cpu[:processes]), 2),
        quiet_client_cpu_s=round(sum(quiet_cpu[processes:]), 2),
        quiet_pings=sum(sum(quiet_window[0] <= t < quiet_window[1] for t in report[5]) for report in reports),
        **ping_bursts(accepted, acked, chosen, shares, [report[5] for report in reports]),
    )
    if args.multi_dump:
        dump_events(args.multi_dump, accepted, acked, chosen, shares, floor.arrivals, [report[5] for report in reports])
    return result


def dump_events(path: str, accepted, acked, chosen, shares, floor_arrivals, pings) -> None:
    """Write one JSON line per event (accepted time, process, ack and floor latency) and per ping, for a timeline."""
    node_of_user = {user_id: k for k, share in enumerate(shares) for user_id in share}
    with open(path, "w") as out:
        for seq, at in sorted(accepted.items()):
            ack, heard = acked.get(seq), floor_arrivals.get(seq)
            record = {"seq": seq, "at": at, "node": node_of_user[chosen[seq]],
                      "ack_ms": None if ack is None else round((ack - at) * 1000, 2),
                      "floor_ms": None if heard is None else round((heard - at) * 1000, 2)}  # fmt: skip
            out.write(json.dumps(record) + "\n")
        for k, node_pings in enumerate(pings):
            for at in node_pings:
                out.write(json.dumps({"ping": at, "node": k}) + "\n")


async def _warm(base_urls: list[str], cookies: dict[int, str], user_ids: list[int]) -> None:
    """One socket per process and back: starts its hub (listener, registry) and loads its templates."""
    for base_url in base_urls:
        warm = Clients(base_url, cookies, None)
        await warm.open(user_ids[-1:])
        await asyncio.sleep(0.5)  # its ack reaches the server before the close
        await warm.close()


def _open_in_steps(clients, workers, base_rss, per_node: int, step: int):
    """Open `step` more sockets per process at a time, all processes at once, until per_node or an error.

    Returns (rows, connected user ids per process, the first error or None).
    """
    rows, connected, first_error, opened = [], [[] for _ in clients], None, 0
    while opened < per_node and first_error is None:
        count = min(step, per_node - opened)
        started = time.perf_counter()
        for client in clients:
            client.commands.put(("open", count))
        replies = [client.reply(STEP_TIMEOUT) for client in clients]
        opened += count
        errors = 0
        for k, (_, ids, failed, first, _) in enumerate(replies):
            connected[k] = ids
            errors += failed
            first_error = first_error or (first[0] if first else None)
        total = sum(len(ids) for ids in connected)
        rss = [rss_kb(pid) for pid in workers]
        rows.append(
            {
                "sockets": total,
                "errors": errors,
                "connect_s": time.perf_counter() - started,
                "rss_mb": sum(rss) / 1024,
                "rss_per_socket_kb": sum(r - b for r, b in zip(rss, base_rss, strict=True)) / max(total, 1),
                "threads": sum(psutil.Process(pid).num_threads() for pid in workers),
            }
        )
    return rows, connected, first_error


def ping_bursts(accepted, acked, chosen, shares, pings) -> dict:
    """Split the events by whether their process was pinging its quiet sockets around then (within 1 s).

    The heartbeat pings every socket that acked nothing for a third of PRESENCE_TTL_SECONDS in one pass,
    so each process sends (and then reads acks for) nearly all its sockets at once: a burst.
    """
    node_of_user = {user_id: k for k, share in enumerate(shares) for user_id in share}
    times = [sorted(node_pings) for node_pings in pings]
    busy, calm = {}, {}
    for seq, at in accepted.items():
        k = node_of_user[chosen[seq]]
        near = bisect.bisect_right(times[k], at + 1.0) - bisect.bisect_left(times[k], at - 1.0)
        (busy if near >= max(PING_BURST_MIN, len(shares[k]) // 20) else calm)[seq] = at
    calm_row, busy_row = latency_stats(calm, acked), latency_stats(busy, acked)
    return {
        "events_in_ping_burst": len(busy),
        "ack_p99_ms_outside_ping_bursts": round(calm_row["p99_ms"], 2),
        "ack_p99_ms_in_ping_bursts": round(busy_row["p99_ms"], 2),
        "calm_row": calm_row,
        "busy_row": busy_row,
    }


def summarize(
    args, servers, shares, connected, steps, first_error, base_rss, rss_now, before, after, floor, accepted,
    acked, unrouted, reports, cpu_before, cpu_after, load,
) -> dict:  # fmt: skip
    """Turn the counters, client records and RSS into the table's rows and the JSON figures."""
    processes = args.processes
    published = len(accepted)
    expected = published / processes
    nodes = []
    for k, server in enumerate(servers):
        node = next((n for n in after if n.startswith(f"bench{k}-")), None)
        now, then = after.get(node, {}), before.get(node, {})
        window = {name: now.get(name, 0) - then.get(name, 0) for name in WINDOW_COUNTERS}
        sockets = len(connected[k])
        nodes.append(
            {
                "node": node or f"bench{k}-?",
                "port": server.port,
                "sockets": sockets,
                **window,
                "share": window["inbound_events"] / expected if expected else float("nan"),
                "frames_all": now.get("frames", 0),
                "acks_all": now.get("acks", 0),
                "rss_mb": rss_now[k] / 1024,
                "rss_per_socket_kb": (rss_now[k] - base_rss[k]) / max(sockets, 1),
                "cpu_s": cpu_after[k] - cpu_before[k],
                "histogram": {key: now.get(key, 0) - then.get(key, 0) for key in now if key.startswith("ack_")},
            }
        )
    histogram: dict[str, float] = {}
    for node in nodes:
        for key, value in node["histogram"].items():
            histogram[key] = histogram.get(key, 0) + value
    frames_all = sum(node["frames_all"] for node in nodes)
    acks_all = sum(node["acks_all"] for node in nodes)
    frames_window = sum(node["frames"] for node in nodes)
    acks_window = sum(node["acks"] for node in nodes)
    inbound_total = sum(node["inbound_events"] for node in nodes)
    server_p99 = histogram_p99_bucket(histogram)
    client = latency_stats(accepted, acked)
    floor_row = latency_stats(accepted, floor.arrivals)
    baseline = floor.events / expected if expected else float("nan")
    share_max = max(node["share"] for node in nodes)
    sockets_total = sum(node["sockets"] for node in nodes)
    client_cpu = [after - before for after, before in zip(cpu_after[processes:], cpu_before[processes:], strict=True)]
    return {
        "steps": steps,
        "nodes": nodes,
        "client_row": client,
        "floor_row": floor_row,
        "processes": processes,
        "sockets_target": processes * args.multi_sockets,
        "sockets_total": sockets_total,
        "multi_first_error": first_error,
        "multi_rate": args.multi_rate,
        "multi_duration": args.multi_duration,
        "multi_load_avg_1m": round(load, 2),
        "multi_events": published,
        "multi_unrouted": unrouted,
        "inbound_events_total": int(inbound_total),
        "inbound_share_max": round(share_max, 3),
        "inbound_share_baseline": round(baseline, 3),
        "baseline_events": floor.events,
        "inbound_share_vs_baseline": round(share_max / baseline, 3) if baseline else None,
        "messages_per_event": round(floor.messages / published, 3) if published else None,
        "ack_p50_ms": round(client["p50_ms"], 2),
        "ack_p95_ms": round(client["p95_ms"], 2),
        "ack_p99_ms": round(client["p99_ms"], 2),
        "ack_max_ms": round(client["max_ms"], 2),
        "ack_lost": client["lost"],
        "ack_mean_ms": round(_mean(accepted, acked) * 1000, 2),
        "server_ack_mean_ms": (
            round(histogram["ack_sum"] / histogram["ack_count"] * 1000, 2) if histogram.get("ack_count") else None
        ),
        "server_ack_count": int(histogram.get("ack_count", 0)),
        "server_ack_p99_bucket_ms": None if server_p99 is None else round(server_p99 * 1000),
        "server_ack_le_100ms": (
            round(histogram.get("ack_le_0.1", 0) / histogram["ack_count"], 5) if histogram.get("ack_count") else None
        ),
        "multi_floor_p99_ms": round(floor_row["p99_ms"], 2),
        "ack_rate": round(acks_all / frames_all, 5) if frames_all else None,
        "ack_rate_events": round(acks_window / frames_window, 5) if frames_window else None,
        "frames_total": int(frames_all),
        "resends": int(sum(node["resends"] for node in nodes)),
        "unacked": int(sum(node["unacked"] for node in nodes)),
        "client_frames": sum(report[2] for report in reports),
        "client_acks_sent": sum(report[3] for report in reports),
        "closed_by_server": sum(report[4] for report in reports),
        "rss_per_socket_kb_multi": round(max(node["rss_per_socket_kb"] for node in nodes), 1),
        "rss_per_socket_kb_multi_mean": round(
            sum(node["rss_per_socket_kb"] * node["sockets"] for node in nodes) / max(sockets_total, 1), 1
        ),
        "web_cpu_s": round(sum(node["cpu_s"] for node in nodes), 2),
        "client_cpu_s": round(sum(client_cpu), 2),
    }


def _mean(sent: dict[int, float], done: dict[int, float]) -> float:
    values = [done[seq] - at for seq, at in sent.items() if seq in done]
    return sum(values) / len(values) if values else float("nan")


def print_multi(result: dict) -> None:
    """Print the multi-process phase's table."""
    print(
        f"realtime multi: {result['processes']} web processes (gunicorn gthread, 1 worker each), "
        f"{result['sockets_total']} of {result['sockets_target']} signed-in sockets, every frame acked; "
        f"{result['multi_rate']:g} events/s for {result['multi_duration']:g} s through route_badge; "
        f"load average {result['multi_load_avg_1m']} before the events"
    )
    print(f"{'step':<5} {'sockets':>7} {'errors':>6} {'connect s':>9} {'RSS MB':>7} {'KB/sock':>7} {'threads':>7}")
    for n, row in enumerate(result["steps"], 1):
        print(
            f"{n:<5} {row['sockets']:>7} {row['errors']:>6} {row['connect_s']:>9.1f} {row['rss_mb']:>7.0f} "
            f"{row['rss_per_socket_kb']:>7.1f} {row['threads']:>7}"
        )
    print(
        f"{'node':<22} {'sockets':>7} {'inbound':>7} {'share':>6} {'frames':>6} {'acks':>6} {'resend':>6} "
        f"{'RSS MB':>7} {'KB/sock':>7} {'CPU s':>6}"
    )
    for node in result["nodes"]:
        print(
            f"{node['node']:<22} {node['sockets']:>7} {node['inbound_events']:>7.0f} {node['share']:>5.2f}x "
            f"{node['frames']:>6.0f} {node['acks']:>6.0f} {node['resends']:>6.0f} {node['rss_mb']:>7.0f} "
            f"{node['rss_per_socket_kb']:>7.1f} {node['cpu_s']:>6.1f}"
        )
    print(
        f"{'every node channel':<22} {'-':>7} {result['baseline_events']:>7} "
        f"{result['inbound_share_baseline']:>5.2f}x   (a process hearing every event, as each did before routing)"
    )
    print(
        f"inbound share max {result['inbound_share_max']:.2f}x of an even split (target 1.2) vs "
        f"{result['inbound_share_baseline']:.2f}x hearing every event: ratio {result['inbound_share_vs_baseline']}; "
        f"{result['messages_per_event']} node messages per event, 1 registry lookup per event; "
        f"{result['multi_unrouted']} events reached no node"
    )
    print(f"{'latency':<26} {'events':>6} {'lost':>5} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    for name, row, events in (
        ("accepted -> client ack", result["client_row"], result["multi_events"]),
        ("  outside ping bursts", result["calm_row"], result["multi_events"] - result["events_in_ping_burst"]),
        ("  within 1 s of a burst", result["busy_row"], result["events_in_ping_burst"]),
        ("floor (bare subscriber)", result["floor_row"], result["multi_events"]),
    ):
        print(
            f"{name:<26} {events:>6} {row['lost']:>5} {row['p50_ms']:>7.1f} {row['p95_ms']:>7.1f} "
            f"{row['p99_ms']:>7.1f} {row['max_ms']:>7.1f}"
        )
    bucket = result["server_ack_p99_bucket_ms"]
    print(
        f"server histogram: {result['server_ack_count']} acks timed, mean {result['server_ack_mean_ms']} ms "
        f"(client {result['ack_mean_ms']} ms), {100 * (result['server_ack_le_100ms'] or 0):.2f} % within 100 ms, "
        f"p99 in the bucket <= {bucket if bucket is not None else '> 10000'} ms (target 100)"
    )
    print(
        f"ack rate {100 * (result['ack_rate'] or 0):.3f} % of {result['frames_total']} frames (target 99.9; "
        f"during the events {100 * (result['ack_rate_events'] or 0):.3f} %), {result['resends']} resends, "
        f"{result['unacked']} given up, {result['closed_by_server']} sockets closed by the server; "
        f"RSS per socket max {result['rss_per_socket_kb_multi']} KB (mean {result['rss_per_socket_kb_multi_mean']}; "
        f"target 64); CPU during the events: web {result['web_cpu_s']} s, bench clients {result['client_cpu_s']} s"
        + (f"; first error: {result['multi_first_error']}" if result["multi_first_error"] else "")
    )
    print(
        f"the same {result['multi_duration']:g} s before the events, sockets open and no event: web CPU "
        f"{result['quiet_web_cpu_s']} s, bench clients {result['quiet_client_cpu_s']} s, "
        f"{result['quiet_pings']} pings acked"
    )
