"""How a step's decodes are grouped into attention calls: the model's step builder makes these groups and the
modeled clock prices them, so both read this one rule (torch-free, in core/: below both cost/ and model/)."""
from __future__ import annotations

# Cost, in slot-keys, of one more attention call: splitting decodes into groups pays off when it skips
# reading more than this many (slot, key) pairs of the slabs. Measured on CPU (about 300 was best); on a GPU
# reading keys is cheap and every call costs kernel launches, so it splits only for big savings. A heuristic:
# exactness is unaffected.
GROUP_CALL_COST = 256
GROUP_CALL_COST_CUDA = 65536


def group_decodes(dec: list[tuple[int, int, int]], call_cost: int | None = None) -> list[list[tuple[int, int, int]]]:
    """Split (row, slot, context) decodes, sorted by slot, into runs of neighbouring slots.

    One call over a slot range reads every slot's slab up to the longest context in the range, so a long
    sequence next to short ones makes them all pay; a new group costs one more call. Greedy, left to right.
    """
    call_cost = GROUP_CALL_COST if call_cost is None else call_cost
    groups: list[list[tuple[int, int, int]]] = []
    lo = hi = T = 0
    for d in dec:
        _, slot, ctx = d
        if groups and (slot + 1 - lo) * max(T, ctx) <= (hi - lo) * T + call_cost + ctx:
            groups[-1].append(d)
            hi, T = slot + 1, max(T, ctx)
        else:
            groups.append([d])
            lo, hi, T = slot, slot + 1, ctx
    return groups
