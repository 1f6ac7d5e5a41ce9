"""The TPU API fake lives with the rehearsal's other loopback fakes; tests import it from here."""

from tools.rehearsal.fakes.tpu import FakeTpuApi, Request

__all__ = ["FakeTpuApi", "Request"]
