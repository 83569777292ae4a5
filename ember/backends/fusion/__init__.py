"""The Fusion decorator: lazy per-thread op streams, drained and fused on read."""

from .backend import Fusion, FusionTensor
from .ir import READ_ONLY, READ_WRITE, OperationIr, TensorIr
from .stream import Block, FusionStats, Plan, Stream

__all__ = ["Fusion", "FusionTensor", "OperationIr", "TensorIr", "READ_ONLY", "READ_WRITE", "Block", "Plan",
           "Stream", "FusionStats"]
