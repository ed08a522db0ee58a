"""Host-to-device links: what a PCIe link carries per direction, for pricing a batch's copy.

Per lane and direction after the line encoding (PCI-SIG base specifications): 2.5 and 5 GT/s with 8b/10b (gen 1-2),
8, 16 and 32 GT/s with 128b/130b (gen 3-5), 64 GT/s PAM4 with 242/256 FLIT (gen 6). Pinned (page-locked) copies
approach this rate; pageable ones are staged through a pinned buffer by the driver and run below it (CUDA C++ Best
Practices Guide, "Pinned Memory").
"""

from __future__ import annotations

PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def pcie_gbps(gen: object, width: object) -> float | None:
    """GB/s per direction of a PCIe link (gen 5 x16: 63.0); None where either is unknown."""
    if not isinstance(gen, int) or not isinstance(width, int) or isinstance(gen, bool) or width <= 0:
        return None
    lane = PCIE_LANE_GBPS.get(gen)
    return lane * width if lane is not None else None
