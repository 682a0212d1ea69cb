"""ndflow from Python: detector pipelines, frames as zero-copy numpy arrays, Python plugins.

    import ndflow
    p = ndflow.Pipeline()
    p.add("sim", "SIM1", SizeX=512, SizeY=512, DataType="UInt16", ImageMode="Multiple",
          NumImages=100)
    p.add("roi", "ROI1", NDArrayPort="SIM1", MinX=100, SizeX=64)
    with p.frames("ROI1", queue=10) as frames:
        p.start()
        for f in frames:
            print(f.unique_id, f.array.sum())   # f.array: read-only view, no copy

See docs/python.md.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
import weakref

from . import _ndflow
from ._ndflow import Frame, FrameStream, Port, __version__, param_declarations, port_types

__all__ = [
    "Pipeline",
    "Port",
    "Frame",
    "FrameStream",
    "port_types",
    "param_declarations",
    "__version__",
]

_live: "weakref.WeakSet[Pipeline]" = weakref.WeakSet()


def _read_toml(source) -> tuple[str, str]:
    """(text, name for error messages) from a path or TOML text."""
    if isinstance(source, os.PathLike):
        path = os.fspath(source)
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    if not isinstance(source, str):
        raise TypeError(f"from_toml takes a path or TOML text, not {type(source).__name__}")
    looks_like_path = "\n" not in source and "=" not in source and "[" not in source
    if looks_like_path:
        with open(source, encoding="utf-8") as f:
            return f.read(), source
    return source, "<string>"


class _Progress:
    """tqdm when installed, otherwise a rate line on stderr every few seconds."""

    def __init__(self, pipeline: "Pipeline", enabled: bool | None):
        self.p = pipeline
        self.enabled = enabled
        self.t0 = time.monotonic()
        self.start_count = pipeline._frames_acquired()
        self.bar = None  # None: not tried yet; False: no tqdm; else the bar (no truth value)
        self.last = self.t0
        self.shown = False

    def tick(self):
        if self.enabled is False:
            return
        now = time.monotonic()
        # Short waits stay quiet unless progress was asked for.
        if self.enabled is None and now - self.t0 < 2.0:
            return
        n = self.p._frames_acquired() - self.start_count
        if self.bar is None and not self.shown:
            try:
                from tqdm.auto import tqdm  # optional

                self.bar = tqdm(desc="ndflow", unit="frame", initial=n, file=sys.stderr)
            except ImportError:
                self.bar = False
        if self.bar is not None and self.bar is not False:
            self.bar.update(n - self.bar.n)
        elif now - self.last >= 2.0 or not self.shown:
            dt = now - self.t0
            print(
                f"ndflow: {n} frames in {dt:.1f} s ({n / dt if dt > 0 else 0:.1f} frames/s), "
                f"{'idle' if self.p.is_idle() else 'running'}",
                file=sys.stderr,
                flush=True,
            )
            self.last = now
        self.shown = True

    def close(self):
        if self.bar is not None and self.bar is not False:
            self.tick()
            self.bar.close()


class Pipeline(_ndflow.Pipeline):
    __doc__ = _ndflow.Pipeline.__doc__

    def __init__(self, *args, **kwargs):
        # Construction happens in the extension's __new__; remember the pipeline so that
        # interpreter exit closes it (stops its threads before Python goes away).
        _live.add(self)

    @classmethod
    def from_toml(cls, source, *, serve_pva: bool = False, serve_ca: bool = False) -> "Pipeline":
        """A pipeline from a config file (a path) or its text, as `ndflow run` reads it.

        Errors raise ValueError with the file, line, port and key. The config's top-level
        `pva`/`ca` keys are for the IOC binary; from Python, PVs are served only when
        `serve_pva` / `serve_ca` are true (from `start()` on).
        """
        text, name = _read_toml(source)
        return cls(toml=text, file=name, serve_pva=serve_pva, serve_ca=serve_ca)

    def wait_idle(self, timeout: float | None = None, progress: bool | None = None) -> bool:
        """Waits until no driver acquires and every plugin has drained; True when idle,
        False on time-out. The GIL is released while waiting. Waits longer than 2 s show
        progress (tqdm when installed, else a rate line on stderr); `progress=False`
        silences it, `True` shows it at once. Ctrl-C stops acquisition, drains, and
        re-raises KeyboardInterrupt.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        prog = _Progress(self, progress)
        try:
            while True:
                step = 0.1
                if deadline is not None:
                    step = max(0.0, min(step, deadline - time.monotonic()))
                if self._wait_idle_for(step):
                    return True
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                prog.tick()
        except KeyboardInterrupt:
            self.stop()
            self._wait_idle_for(10.0)
            raise
        finally:
            prog.close()

    def run(self, timeout: float | None = None, progress: bool | None = None) -> bool:
        """`start()` then `wait_idle(timeout, progress)`."""
        self.start()
        return self.wait_idle(timeout, progress)


@atexit.register
def _close_all():
    for p in list(_live):
        try:
            p.close()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
