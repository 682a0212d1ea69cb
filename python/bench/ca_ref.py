"""Python ends of `ndflow bench ca` (pyepics = EPICS base's libca; pythonSoftIOC = RSRV).

usage:
  ca_ref.py check
      Imports epics, softioc and numpy; prints {"ok": true} or exits 2 naming what is missing.
  ca_ref.py monitor NAMESFILE WARMUP_S WINDOW_S [ready]
      Connects a channel per line of NAMESFILE with libca (through pyepics' ctypes binding),
      subscribes each with the plainest DBR of its native type (DBE_VALUE | DBE_ALARM) and a
      callback that only counts, waits WARMUP_S, counts callbacks over WINDOW_S and prints one
      JSON line {"connected", "updates", "seconds", "rate", "array_rate"} (array_rate: updates/s
      of the channels whose name ends in ArrayData). With `ready`, prints
      {"ready": connected} once subscribed and counts until stdin reaches EOF instead (the
      10-clients load of the pipeline-rate rows).
  ca_ref.py arrays PV WARMUP_S WINDOW_S
      Monitors waveform PV with pyepics' own subscription path (the value arrives as a numpy
      array, as pyepics users get it) and prints {"frames", "bytes", "seconds", "fps", "gbps",
      "cpu"} over WINDOW_S after WARMUP_S (cpu: this process's CPU time per second of the
      window, all threads: 1.0 = one core busy, i.e. the client is the limit).
  ca_ref.py softioc PREFIX N [ao|calc]
      Serves N records PREFIXv0..PREFIXv{N-1} (PREFIX ends with ':') with pythonSoftIOC (RSRV;
      no PV Access) and prints {"ready": N} once iocInit is done. ao: one Python thread sets
      every ao record in turn as fast as it can; calc: calc records (A+1) with SCAN=Event are
      all processed by EPICS' event scan thread (C) on each postEvent, posted every 1 ms.
      Runs until stdin reaches EOF; prints {"sets", "seconds", "sets_per_s"} (records set or
      scheduled per second).
  ca_ref.py tcprecv PORT BYTES FRAMES
      Raw loopback TCP into Python: connects to 127.0.0.1:PORT and reads FRAMES messages of
      BYTES each into one reused buffer (recv_into); prints {"frames", "bytes", "seconds"}
      (first to last message).

The Rust side passes the loopback environment (EPICS_CA_ADDR_LIST=127.0.0.1, per-run ports).
"""

import json
import sys
import time


def out(obj):
    print(json.dumps(obj), flush=True)


def check():
    missing = []
    for mod in ("numpy", "epics", "softioc"):
        try:
            __import__(mod)
        except Exception as e:  # noqa: BLE001 - any import failure means "missing"
            missing.append(f"{mod} ({e.__class__.__name__}: {e})")
    if missing:
        print("missing Python packages: " + ", ".join(missing), file=sys.stderr)
        sys.exit(2)
    out({"ok": True})


def connect_all(names, timeout=30.0):
    from epics import ca

    ca.initialize_libca()
    chids = [ca.create_channel(n, connect=False, auto_cb=False) for n in names]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ca.pend_event(0.05)
        if all(ca.isConnected(c) for c in chids):
            break
    return chids


def monitor(namesfile, warmup, window, ready=False):
    from epics import ca, dbr

    with open(namesfile) as f:
        names = [l.strip() for l in f if l.strip()]
    chids = connect_all(names)
    counter = [0, 0]  # all updates, ArrayData updates

    def count(args):
        counter[0] += 1

    def count_array(args):
        counter[0] += 1
        counter[1] += 1

    cb = dbr.make_callback(count, dbr.event_handler_args)
    cb_array = dbr.make_callback(count_array, dbr.event_handler_args)
    keep = []
    connected = 0
    for name, c in zip(names, chids):
        if not ca.isConnected(c):
            continue
        connected += 1
        evid = ctypes_void_p()
        ret = ca.libca.ca_create_subscription(
            ca.field_type(c),
            0,
            c,
            dbr.DBE_VALUE | dbr.DBE_ALARM,
            cb_array if name.endswith("ArrayData") else cb,
            None,
            ctypes_byref(evid),
        )
        if ret != 1:
            print(f"subscription failed for {ca.name(c)}: {ret}", file=sys.stderr)
        keep.append(evid)
    ca.flush_io()
    if ready:
        out({"ready": connected})
        t0 = time.perf_counter()
        n0, a0 = counter
        sys.stdin.read()
        secs = time.perf_counter() - t0
    else:
        time.sleep(warmup)
        n0, a0 = counter
        t0 = time.perf_counter()
        time.sleep(window)
        secs = time.perf_counter() - t0
    n, a = counter[0] - n0, counter[1] - a0
    out({
        "connected": connected,
        "updates": n,
        "seconds": secs,
        "rate": n / secs if secs > 0 else 0.0,
        "array_rate": a / secs if secs > 0 else 0.0,
    })
    ca.finalize_libca()


def ctypes_void_p():
    import ctypes

    return ctypes.c_void_p()


def ctypes_byref(x):
    import ctypes

    return ctypes.byref(x)


def arrays(pv, warmup, window):
    from epics import ca

    chids = connect_all([pv], timeout=20.0)
    chid = chids[0]
    if not ca.isConnected(chid):
        print(f"{pv} did not connect", file=sys.stderr)
        sys.exit(1)
    state = {"counting": False, "frames": 0, "bytes": 0, "t_first": None, "t_last": None}

    def cb(value=None, **kw):
        if not state["counting"] or value is None:
            return
        now = time.perf_counter()
        if state["t_first"] is None:
            state["t_first"] = now  # the first counted frame opens the window
        else:
            state["frames"] += 1
            state["bytes"] += getattr(value, "nbytes", 0)
        state["t_last"] = now

    keep = ca.create_subscription(chid, callback=cb)  # noqa: F841 - must stay alive
    time.sleep(warmup)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    state["counting"] = True
    time.sleep(window)
    state["counting"] = False
    cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    t0, t1 = state["t_first"], state["t_last"]
    secs = (t1 - t0) if t0 is not None and t1 is not None else 0.0
    fr, nb = state["frames"], state["bytes"]
    out({
        "frames": fr,
        "bytes": nb,
        "seconds": secs,
        "fps": fr / secs if secs > 0 else 0.0,
        "gbps": nb / secs / 1e9 if secs > 0 else 0.0,
        "cpu": cpu,
    })
    ca.finalize_libca()


def softioc_server(prefix, n, mode="ao"):
    import ctypes
    import threading

    from softioc import builder, softioc

    # Record names PREFIX + "v0" ...: the device name is PREFIX without its trailing ':'.
    dev = prefix[:-1] if prefix.endswith(":") else prefix
    builder.SetDeviceName(dev)
    if mode == "ao":
        recs = [builder.aOut(f"v{i}", initial_value=0.0) for i in range(n)]
    else:
        # calc records (DBF_DOUBLE, like ao) counting up, processed in C by the event scan
        # thread each time the event "cabench" is posted: RSRV fed without Python per record.
        recs = [
            builder.records.calc(f"v{i}", CALC="A+1", INPA=f"{dev}:v{i} NPP", SCAN="Event",
                                 EVNT="cabench")
            for i in range(n)
        ]
    builder.LoadDatabase()
    from softioc import asyncio_dispatcher

    # On_update callbacks would run there; the updater below is a plain thread.
    softioc.iocInit(asyncio_dispatcher.AsyncioDispatcher(), enable_pva=False)
    stop = threading.Event()
    stats = {"sets": 0, "seconds": 0.0}

    def update_ao():
        x = 0.0
        t0 = time.perf_counter()
        sets = 0
        while not stop.is_set():
            x += 1.0
            for r in recs:
                r.set(x)
            sets += len(recs)
        stats["sets"] = sets
        stats["seconds"] = time.perf_counter() - t0

    def update_calc():
        from epicscorelibs.ioc import dbCore

        dbCore.eventNameToHandle.restype = ctypes.c_void_p
        dbCore.eventNameToHandle.argtypes = [ctypes.c_char_p]
        dbCore.postEvent.argtypes = [ctypes.c_void_p]
        h = dbCore.eventNameToHandle(b"cabench")
        t0 = time.perf_counter()
        events = 0
        while not stop.is_set():
            dbCore.postEvent(h)
            events += 1
            # One event processes all n records; posting faster than the scan thread works
            # only overflows its queue.
            time.sleep(0.001)
        stats["sets"] = events * n  # records scheduled (some events may have been dropped)
        stats["seconds"] = time.perf_counter() - t0

    th = threading.Thread(target=update_ao if mode == "ao" else update_calc, daemon=True)
    th.start()
    out({"ready": n})
    sys.stdin.read()
    stop.set()
    th.join(timeout=10)
    s = stats["seconds"]
    out({"sets": stats["sets"], "seconds": s, "sets_per_s": stats["sets"] / s if s > 0 else 0.0})
    sys.stdout.flush()
    import os

    os._exit(0)  # the IOC's threads would keep the interpreter alive


def tcprecv(port, nbytes, frames):
    import socket

    s = socket.create_connection(("127.0.0.1", port))
    buf = bytearray(nbytes)
    view = memoryview(buf)
    t_first = t_last = None
    got = 0
    for _ in range(frames):
        off = 0
        while off < nbytes:
            r = s.recv_into(view[off:], nbytes - off)
            if r == 0:
                break
            off += r
        if off < nbytes:
            break
        now = time.perf_counter()
        if t_first is None:
            t_first = now
        t_last = now
        got += 1
    s.close()
    secs = (t_last - t_first) if got > 1 else 0.0
    out({"frames": max(got - 1, 0), "bytes": max(got - 1, 0) * nbytes, "seconds": secs})


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    cmd, args = argv[0], argv[1:]
    if cmd == "check":
        check()
    elif cmd == "monitor":
        monitor(args[0], float(args[1]), float(args[2]), len(args) > 3 and args[3] == "ready")
    elif cmd == "arrays":
        arrays(args[0], float(args[1]), float(args[2]))
    elif cmd == "softioc":
        softioc_server(args[0], int(args[1]), args[2] if len(args) > 2 else "ao")
    elif cmd == "tcprecv":
        tcprecv(int(args[0]), int(args[1]), int(args[2]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
