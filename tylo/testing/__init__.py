"""Helpers for testing and measuring kernels: ``do_bench`` (CUDA-event timing with an L2 flush)."""
from .bench import BenchResult, CudaEventTimer, Timer, do_bench

__all__ = ["BenchResult", "CudaEventTimer", "Timer", "do_bench"]
