"""Exact optimal transport for many small problems in one compiled loop.

Word Mover's Distance between two job titles is a transport problem of about 10 x 10 words.
POT's network simplex solves one in ~10 us, but calling it from Python once per pair adds
about 35 us of argument handling, distance matrix and bookkeeping. Here a whole batch runs in
numba-compiled code, with no Python per pair: for each pair, the distance matrix from the word
vectors, then successive shortest paths (the primal-dual method behind the Hungarian
algorithm, for unequal weights):

- a dual start: column minima, then row minima of what is left, so that every row and column
  has a cell of zero reduced cost, and as much flow as fits on those cells;
- then, while some supply is left, Dijkstra's algorithm from every row with supply left, on
  reduced costs (non-negative, so no negative cycles to cancel), to the nearest column with
  demand left; the potentials move by the distances, which keeps every reduced cost
  non-negative and every cell with flow at zero; the path carries as much as it can.

Why not the transportation simplex that POT and the textbooks use: documents have mostly
distinct words of equal weight, so the problem is nearly an assignment problem, on which the
simplex spends most of its pivots on degenerate bases (about 9 per 12-word pair, with nothing
moved). The dual start settles most rows at once and leaves 2 to 3 shortest paths per pair.

The result is the same optimum as POT's solver: the tests compare it with POT on degenerate
problems and with gensim on random documents. A problem not finished within its iteration
budget (never seen in tests) is reported as NaN, and the caller solves it with POT instead,
as it does problems above a size (`max_cells`), where POT's network simplex is faster.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

# Flow, supply or demand below this is zero: it is what rounding leaves of the weights (which
# sum to 1) after a subtraction, and treating it as flow would only add empty paths.
FLOW_TOLERANCE = 1e-14
# A cell whose reduced cost is below this takes flow in the start; the optimum moves by at
# most this much, far below the 1e-9 at which the tests compare with POT.
TIGHT = 1e-13
PATHS_PER_LINE = 4  # the budget: 4 shortest paths per row and column, plus 100
CACHE_LINE = 64  # bytes
ZERO_DISTANCES = 1e-8  # gensim's test for an all-zero distance matrix (its answer: inf)


@njit(cache=True, nogil=True)
def transport_batch(
    unit: np.ndarray,
    squared_norms: np.ndarray,
    ids: np.ndarray,
    weights: np.ndarray,
    offsets: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    max_cells: int,
) -> np.ndarray:
    """WMD of the document pairs (`first[k]`, `second[k]`): the documents are slices
    `offsets[d]:offsets[d + 1]` of `ids` (unique word ids) and `weights` (summing to 1).

    Distances are Euclidean between the rows of `unit`, 0 between a word and itself, as in
    `jobrec_core.wmd.distance_matrix`, and gensim's special answers are kept: an empty
    document is infinitely far, two documents of one and the same word are at 0, all-zero
    distances give inf. NaN marks a problem left to POT: one larger than `max_cells` (n x m),
    where POT's network simplex is faster, or one not finished within its budget."""
    results = np.empty(first.size)
    sizes = offsets[1:] - offsets[:-1]
    longest = max(1, sizes.max()) if sizes.size else 1
    workspace = _workspace(longest, longest)
    cost_buffer = np.empty(longest * longest)
    flat_unit = unit.reshape(-1)
    for k in range(first.size):
        a0, a1 = offsets[first[k]], offsets[first[k] + 1]
        b0, b1 = offsets[second[k]], offsets[second[k] + 1]
        if k + 1 < first.size:
            _prefetch_words(flat_unit, unit.shape[1], ids, offsets, first[k + 1])
            _prefetch_words(flat_unit, unit.shape[1], ids, offsets, second[k + 1])
        n, m = a1 - a0, b1 - b0
        if n == 0 or m == 0:
            results[k] = np.inf
            continue
        if n == 1 and m == 1 and ids[a0] == ids[b0]:
            results[k] = 0.0
            continue
        if n * m > max_cells:
            results[k] = np.nan
            continue
        cost = cost_buffer[: n * m].reshape((n, m))
        _distances(unit, squared_norms, ids[a0:a1], ids[b0:b1], cost)
        if abs(cost.sum()) < ZERO_DISTANCES:
            results[k] = np.inf
            continue
        supply = weights[a0:a1]
        demand = weights[b0:b1] * (supply.sum() / weights[b0:b1].sum())
        results[k] = _solve(supply, demand, cost, workspace)
    return results


@njit(cache=True, nogil=True)
def _prefetch_words(
    flat_unit: np.ndarray, dimensions: int, ids: np.ndarray, offsets: np.ndarray, document: int
) -> None:
    """Asks the CPU to bring a document's word vectors into the cache while the current pair
    is solved: with a vocabulary larger than the L2 cache, waiting for them is most of the
    cost of the distances."""
    step = max(1, CACHE_LINE // flat_unit.itemsize)
    for position in range(offsets[document], offsets[document + 1]):
        start = ids[position] * dimensions
        for index in range(start, start + dimensions, step):
            _prefetch(flat_unit, index)


@intrinsic
def _prefetch(typingctx, array, index):  # type: ignore[no-untyped-def]
    """`llvm.prefetch` of `array[index]` (read, kept in every cache level)."""

    def codegen(context, builder, signature, arguments):  # type: ignore[no-untyped-def]
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, arguments[0])
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, view, [arguments[1]], wraparound=False
        )
        byte_pointer = ir.IntType(8).as_pointer()
        function = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [byte_pointer, *([ir.IntType(32)] * 3)]),
            "llvm.prefetch.p0i8",
        )
        constant = ir.Constant
        builder.call(
            function,
            [
                builder.bitcast(pointer, byte_pointer),
                constant(ir.IntType(32), 0),
                constant(ir.IntType(32), 3),
                constant(ir.IntType(32), 1),
            ],
        )
        return context.get_dummy_value()

    return types.void(array, index), codegen


# Reassociation lets the dot products use SIMD; it changes sums by rounding only.
@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _distances(
    unit: np.ndarray,
    squared_norms: np.ndarray,
    words1: np.ndarray,
    words2: np.ndarray,
    cost: np.ndarray,
) -> None:
    """Euclidean distances between two documents' words into `cost`; exactly 0 from a word
    to itself. The products are in float64 (as scipy's `cdist`, which gensim uses, computes
    them), from vectors kept in float32: loading the vectors bounds this loop, and a 40k-word
    vocabulary in float32 stays in the L3 cache. Four rows at a time, so that each vector of
    `words2` is loaded once for four dot products. (`np.float64`, not `float`: numba's
    `float()` of a float32 stays float32, which moves distances by 1e-8.)"""
    row = 0
    while row + 4 <= words1.size:
        w0, w1, w2, w3 = words1[row], words1[row + 1], words1[row + 2], words1[row + 3]
        for j in range(words2.size):
            wj = words2[j]
            dot0 = dot1 = dot2 = dot3 = np.float64(0.0)
            for d in range(unit.shape[1]):
                x = np.float64(unit[wj, d])
                dot0 += np.float64(unit[w0, d]) * x
                dot1 += np.float64(unit[w1, d]) * x
                dot2 += np.float64(unit[w2, d]) * x
                dot3 += np.float64(unit[w3, d]) * x
            cost[row, j] = _distance(squared_norms, w0, wj, dot0)
            cost[row + 1, j] = _distance(squared_norms, w1, wj, dot1)
            cost[row + 2, j] = _distance(squared_norms, w2, wj, dot2)
            cost[row + 3, j] = _distance(squared_norms, w3, wj, dot3)
        row += 4
    for i in range(row, words1.size):
        wi = words1[i]
        for j in range(words2.size):
            wj = words2[j]
            dot = np.float64(0.0)
            for d in range(unit.shape[1]):
                dot += np.float64(unit[wi, d]) * np.float64(unit[wj, d])
            cost[i, j] = _distance(squared_norms, wi, wj, dot)


@njit(cache=True, nogil=True, inline="always")
def _distance(squared_norms: np.ndarray, word1: int, word2: int, dot: float) -> float:
    """|a - b| from |a|^2 + |b|^2 - 2 a.b, clipped at 0 against rounding; 0 for one word."""
    if word1 == word2:
        return 0.0
    squared = squared_norms[word1] + squared_norms[word2] - 2.0 * dot
    return np.sqrt(squared) if squared > 0.0 else 0.0


@njit(cache=True, nogil=True)
def transport_cost(supply: np.ndarray, demand: np.ndarray, cost: np.ndarray) -> float:
    """Minimum cost of moving `supply` (n) to `demand` (m, same total) at `cost` (n x m);
    NaN when the iteration budget runs out."""
    n, m = cost.shape
    return _solve(supply, demand, np.ascontiguousarray(cost), _workspace(n, m))


@njit(cache=True, nogil=True)
def _workspace(rows: int, columns: int) -> tuple[np.ndarray, ...]:
    """The arrays one solve needs, for problems of up to rows x columns, allocated once per
    batch: allocating them per problem costs as much as the solve."""
    return (
        np.empty(rows * columns),  # flow, row-major
        np.empty(rows),  # row potentials u
        np.empty(columns),  # column potentials v
        np.empty(rows),  # supply left
        np.empty(columns),  # demand left
        np.empty(rows),  # row distances (inf: not reached)
        np.empty(columns),  # column distances
        np.empty(columns),  # 0, or inf once a column is scanned (added to keep it out)
        np.empty((3, max(rows, columns)), dtype=np.int64),  # predecessors, scan order
    )


@njit(cache=True, nogil=True, fastmath={"nsz", "contract"})
def _solve(
    supply: np.ndarray, demand: np.ndarray, cost: np.ndarray, workspace: tuple[np.ndarray, ...]
) -> float:
    """:func:`transport_cost` in a preallocated workspace (`cost` C-contiguous).

    Reduced costs are cost[r, c] - u[r] - v[c]: non-negative everywhere, zero where flow is."""
    n, m = cost.shape
    flow, u, v, supply_left, demand_left, row_distance, column_distance, scanned = workspace[:8]
    column_from = workspace[8][0]  # the row a column is reached from
    row_from = workspace[8][1]  # the column a row is reached from (-1: a source)
    scan_order = workspace[8][2]
    for k in range(n * m):
        flow[k] = 0.0
    for r in range(n):
        supply_left[r] = supply[r]
    for c in range(m):
        demand_left[c] = demand[c]
    _dual_start(cost, u, v)
    _fill_tight_cells(cost, u, v, flow, supply_left, demand_left)
    budget = PATHS_PER_LINE * (n + m) + 100
    for _ in range(budget):
        # Dijkstra from every row with supply left (distance 0) over the residual graph: a
        # row reaches every column (reduced cost >= 0), a column the rows that send it flow
        # (reduced cost 0, flow that can be sent back).
        sources = 0
        for c in range(m):
            column_distance[c] = np.inf
            scanned[c] = 0.0
        for r in range(n):
            row_distance[r] = np.inf
            if supply_left[r] > 0.0:
                sources += 1
                row_distance[r] = 0.0
                row_from[r] = -1
                _relax(cost, u, v, r, 0.0, scanned, column_distance, column_from)
        if sources == 0:
            return _total_cost(cost, flow)
        scans = 0
        while True:
            nearest = -1
            distance = np.inf
            for c in range(m):
                key = column_distance[c] + scanned[c]
                closer = key < distance
                distance = key if closer else distance
                nearest = c if closer else nearest
            if nearest < 0:  # supply left but no demand: rounding beyond the tolerance
                return np.nan
            scanned[nearest] = np.inf
            scan_order[scans] = nearest
            scans += 1
            if demand_left[nearest] > 0.0:
                break
            for r in range(n):
                if flow[r * m + nearest] > 0.0 and row_distance[r] == np.inf:
                    row_distance[r] = distance
                    row_from[r] = nearest
                    _relax(cost, u, v, r, distance, scanned, column_distance, column_from)
        # New potentials: the nodes closer than the sink move by how much closer they are.
        for k in range(scans):
            c = scan_order[k]
            v[c] -= distance - column_distance[c]
        for r in range(n):
            if row_distance[r] < distance:
                u[r] += distance - row_distance[r]
        _augment(nearest, m, flow, supply_left, demand_left, column_from, row_from)
    return np.nan


@njit(cache=True, nogil=True, fastmath={"nsz", "contract"}, inline="always")
def _dual_start(cost: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
    """v = column minima, then u = row minima of cost - v: a feasible dual with a zero reduced
    cost in every row and every column."""
    n, m = cost.shape
    for c in range(m):
        v[c] = cost[0, c]
    for r in range(1, n):
        for c in range(m):
            x = cost[r, c]
            v[c] = x if x < v[c] else v[c]
    for r in range(n):
        lowest = np.inf
        for c in range(m):
            x = cost[r, c] - v[c]
            lowest = x if x < lowest else lowest
        u[r] = lowest


@njit(cache=True, nogil=True, inline="always")
def _fill_tight_cells(
    cost: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    flow: np.ndarray,
    supply_left: np.ndarray,
    demand_left: np.ndarray,
) -> None:
    """As much flow as fits on the cells of zero reduced cost, row by row (the flow the
    Hungarian algorithm starts from)."""
    n, m = cost.shape
    for r in range(n):
        for c in range(m):
            if cost[r, c] - u[r] - v[c] <= TIGHT and supply_left[r] > 0.0 and demand_left[c] > 0.0:
                moved = min(supply_left[r], demand_left[c])
                flow[r * m + c] += moved
                supply_left[r] = _clear(supply_left[r] - moved)
                demand_left[c] = _clear(demand_left[c] - moved)


@njit(cache=True, nogil=True, fastmath={"nsz", "contract"}, inline="always")
def _relax(
    cost: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    row: int,
    distance: float,
    scanned: np.ndarray,
    column_distance: np.ndarray,
    column_from: np.ndarray,
) -> None:
    """Dijkstra's update from a row reached at `distance` to every unscanned column, written
    with selects rather than branches: which column gets closer is unpredictable."""
    base = distance - u[row]
    for c in range(cost.shape[1]):
        through = base + cost[row, c] - v[c] + scanned[c]
        closer = through < column_distance[c]
        column_distance[c] = through if closer else column_distance[c]
        column_from[c] = row if closer else column_from[c]


@njit(cache=True, nogil=True, inline="always")
def _augment(
    sink: int,
    m: int,
    flow: np.ndarray,
    supply_left: np.ndarray,
    demand_left: np.ndarray,
    column_from: np.ndarray,
    row_from: np.ndarray,
) -> None:
    """Sends as much as the path from its source row to `sink` carries: the source's supply
    left, the sink's demand left, the flow on each cell it sends back."""
    moved = demand_left[sink]
    c = sink
    r = column_from[c]
    while row_from[r] >= 0:
        c = row_from[r]
        moved = min(moved, flow[r * m + c])
        r = column_from[c]
    moved = min(moved, supply_left[r])
    demand_left[sink] = _clear(demand_left[sink] - moved)
    c = sink
    while True:
        r = column_from[c]
        flow[r * m + c] += moved
        if row_from[r] < 0:
            supply_left[r] = _clear(supply_left[r] - moved)
            return
        c = row_from[r]
        flow[r * m + c] = _clear(flow[r * m + c] - moved)


@njit(cache=True, nogil=True, inline="always")
def _clear(amount: float) -> float:
    """`amount`, or 0 when it is only rounding."""
    return amount if amount > FLOW_TOLERANCE else 0.0


@njit(cache=True, nogil=True, inline="always")
def _total_cost(cost: np.ndarray, flow: np.ndarray) -> float:
    n, m = cost.shape
    total = 0.0
    for r in range(n):
        for c in range(m):
            total += flow[r * m + c] * cost[r, c]
    return total
