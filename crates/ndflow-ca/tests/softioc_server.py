"""A real IOC (pythonSoftIOC: EPICS base's RSRV) serving a few records for ndflow-ca's client
tests (tests/softioc.rs). Configuration comes from the environment (loopback, per-test ports).
Prints READY when serving; exits on stdin EOF."""

import os
import sys

import numpy as np
from softioc import asyncio_dispatcher, builder, softioc

builder.SetDeviceName("SIOC")
builder.aOut("AO", initial_value=1.5, PREC=3, EGU="mm", DRVH=5, DRVL=-5, HOPR=10, LOPR=-10)
builder.longOut("LONG", initial_value=42)
builder.mbbOut("MBBO", "Off", "On", "Auto", initial_value=1)
path = np.frombuffer(b"/data/run1\0", dtype=np.uint8)
builder.WaveformOut("CHARWF", initial_value=path, length=256)
builder.WaveformOut("DBLWF", initial_value=np.arange(10, dtype=np.float64) * 0.5, length=100)
builder.stringOut("STR", initial_value="hello")
builder.LoadDatabase()
# The asyncio dispatcher needs no cothread.
softioc.iocInit(asyncio_dispatcher.AsyncioDispatcher())
print("READY", flush=True)
sys.stdin.read()
os._exit(0)
