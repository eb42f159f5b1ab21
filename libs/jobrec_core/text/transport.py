"""Exact optimal transport for many small problems in one compiled loop.

Word Mover's Distance between two job titles is a transport problem of about 10 x 10 words.
POT's network simplex solves one in ~10 us, but calling it from Python once per pair adds
about 35 us of argument handling, distance matrix and bookkeeping. Here a whole batch runs in
numba-compiled code, with no Python per pair: for each pair, the distance matrix from the word
vectors, then successive shortest paths (the primal-dual method behind the Hungarian
algorithm, for unequal weights):

- a dual start: column minima, then row minima of what is left, so that every row and column
  has a cell of zero reduced cost, and as much flow as fits on those cells;
- then, while some supply is left, Dijkstra's algorithm from a row with supply left, on
  reduced costs (non-negative, so no negative cycles to cancel), to the nearest column with
  demand left; the potentials move by the distances, which keeps every reduced cost
  non-negative and every cell with flow at zero; the path carries as much as it can.

Why not the transportation simplex that POT and the textbooks use: documents have mostly
distinct words of equal weight, so the problem is nearly an assignment problem, on which the
simplex spends most of its pivots on degenerate bases (about 9 per 12-word pair, with nothing
moved). The dual start settles most rows at once and leaves 2 to 3 shortest paths per pair.
With repeated words and unequal lengths (weights that differ) a pair needs about as many
paths as it has words, and costs 2 to 3 times more (`benchmarks/wmd.py --zipf`).

Tried and dropped, slower on both kinds of documents: Jonker and Volgenant's augmenting row
reduction before the paths (it removes almost every path on equal weights, but its bidding
costs more than the paths it saves), and a Dijkstra from all rows with supply left at once.

The result is the same optimum as POT's solver: the tests compare it with POT on degenerate
problems and with gensim on random documents. A problem not finished within its iteration
budget (never seen in tests) is reported as NaN, and the caller solves it with POT instead,
as it does problems above a size (`max_cells`): with unequal weights a pair needs about one
path per word, each a pass over the matrix, so POT's network simplex is faster on long
documents.
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
    `jobrec_core.text.wmd.distance_matrix`, and gensim's special answers are kept: an empty
    document is infinitely far, two documents of one and the same word are at 0, all-zero
    distances give inf. NaN marks a problem left to POT: one larger than `max_cells` (n x m)
    or one not finished within its budget."""
    results = np.empty(first.size)
    sizes = offsets[1:] - offsets[:-1]
    longest = max(1, sizes.max()) if sizes.size else 1
    cells = min(longest * longest, max_cells)
    workspace = _workspace(longest, longest, cells)
    cost_buffer = np.empty(cells)
    demand = np.empty(longest)
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
        # As ot.emd2 (gensim) does: the demand scaled to the supply's total.
        scale = weights[a0:a1].sum() / weights[b0:b1].sum()
        for c in range(m):
            demand[c] = weights[b0 + c] * scale
        results[k] = _solve(weights[a0:a1], demand, cost, workspace)
    return results


@njit(cache=True, nogil=True)
def _prefetch_words(
    flat_unit: np.ndarray, dimensions: int, ids: np.ndarray, offsets: np.ndarray, document: int
) -> None:
    """Asks the CPU to bring a document's word vectors into the cache while the current pair
    is solved: with a vocabulary larger than the L2 cache, the distances would otherwise wait
    for memory (on 41k words, a 12-word pair takes about 1 us less)."""
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
        function = builder.module.declare_intrinsic(  # named for the pointer type LLVM uses
            "llvm.prefetch",
            [byte_pointer],
            ir.FunctionType(ir.VoidType(), [byte_pointer, *([ir.IntType(32)] * 3)]),
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
    them), from vectors kept in float32: loading and widening the vectors bounds this loop,
    and a 40k-word vocabulary in float32 stays in the L3 cache. Blocks of 4 x 2 words: each
    vector is loaded once for two or four dot products (a third faster than one at a time;
    the blocks leave out the last rows, and the last column when their count is odd).
    (`np.float64`, not `float`: numba's `float()` of a float32 stays float32, which moves
    distances by 1e-8.)"""
    n, m = words1.size, words2.size
    blocked_rows, blocked_columns = n - n % 4, m - m % 2
    for row in range(0, blocked_rows, 4):
        for column in range(0, blocked_columns, 2):
            _four_by_two(unit, squared_norms, words1, words2, cost, row, column)
    for i in range(n):  # what the blocks leave: the last rows, and the last column if odd
        for j in range(blocked_columns if i < blocked_rows else 0, m):
            wi, wj = words1[i], words2[j]
            dot = np.float64(0.0)
            for d in range(unit.shape[1]):
                dot += np.float64(unit[wi, d]) * np.float64(unit[wj, d])
            cost[i, j] = _distance(squared_norms, wi, wj, dot)


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"}, inline="always")
def _four_by_two(
    unit: np.ndarray,
    squared_norms: np.ndarray,
    words1: np.ndarray,
    words2: np.ndarray,
    cost: np.ndarray,
    row: int,
    column: int,
) -> None:
    w0, w1, w2, w3 = words1[row], words1[row + 1], words1[row + 2], words1[row + 3]
    x0, x1 = words2[column], words2[column + 1]
    d00 = d10 = d20 = d30 = d01 = d11 = d21 = d31 = np.float64(0.0)
    for d in range(unit.shape[1]):
        y0, y1 = np.float64(unit[x0, d]), np.float64(unit[x1, d])
        r0, r1 = np.float64(unit[w0, d]), np.float64(unit[w1, d])
        r2, r3 = np.float64(unit[w2, d]), np.float64(unit[w3, d])
        d00 += r0 * y0
        d10 += r1 * y0
        d20 += r2 * y0
        d30 += r3 * y0
        d01 += r0 * y1
        d11 += r1 * y1
        d21 += r2 * y1
        d31 += r3 * y1
    cost[row, column] = _distance(squared_norms, w0, x0, d00)
    cost[row + 1, column] = _distance(squared_norms, w1, x0, d10)
    cost[row + 2, column] = _distance(squared_norms, w2, x0, d20)
    cost[row + 3, column] = _distance(squared_norms, w3, x0, d30)
    cost[row, column + 1] = _distance(squared_norms, w0, x1, d01)
    cost[row + 1, column + 1] = _distance(squared_norms, w1, x1, d11)
    cost[row + 2, column + 1] = _distance(squared_norms, w2, x1, d21)
    cost[row + 3, column + 1] = _distance(squared_norms, w3, x1, d31)


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
    return _solve(supply, demand, np.ascontiguousarray(cost), _workspace(n, m, n * m))


@njit(cache=True, nogil=True)
def _workspace(rows: int, columns: int, cells: int) -> tuple[np.ndarray, ...]:
    """The arrays one solve needs, for problems of up to rows and columns and cells, allocated
    once per batch: allocating them per problem costs as much as the solve."""
    return (
        np.zeros(cells),  # flow, row-major (each solve leaves it all zero)
        np.empty(rows),  # row potentials u
        np.empty(columns),  # column potentials v
        np.empty(rows),  # supply left
        np.empty(columns),  # demand left
        np.empty(rows),  # row distances
        np.empty(columns),  # column distances
        np.empty((6, max(rows, columns)), dtype=np.int64),  # see _solve
        np.empty(cells, dtype=np.int64),  # each column's rows with flow
    )


@njit(cache=True, nogil=True, fastmath={"nsz", "contract"})
def _solve(
    supply: np.ndarray, demand: np.ndarray, cost: np.ndarray, workspace: tuple[np.ndarray, ...]
) -> float:
    """:func:`transport_cost` in a preallocated workspace (`cost` C-contiguous).

    Reduced costs are cost[r, c] - u[r] - v[c]: non-negative everywhere, zero where flow is."""
    n, m = cost.shape
    flow, u, v, supply_left, demand_left, row_distance, column_distance = workspace[:7]
    column_from = workspace[7][0]  # the row a column is reached from
    row_from = workspace[7][1]  # the column a row is reached from (-1: a source)
    columns = workspace[7][2]  # scanned columns (in scan order), then the others
    holders = workspace[8][: n * m].reshape((m, n))  # holders[c, :held[c]]: rows sending to c
    held = workspace[7][3]
    reached = workspace[7][4]  # the rows this path's Dijkstra reached, in order
    reached_in = workspace[7][5]  # per row, the last path whose Dijkstra reached it
    for r in range(n):
        supply_left[r] = supply[r]
        reached_in[r] = -1
    for c in range(m):
        demand_left[c] = demand[c]
        held[c] = 0
    _dual_start(cost, u, v)
    _fill_tight_cells(cost, u, v, flow, supply_left, demand_left, holders, held)
    budget = PATHS_PER_LINE * (n + m) + 100
    for path in range(budget):
        # Dijkstra from the first row with supply left over the residual graph: a row
        # reaches every column (reduced cost >= 0), a column the rows that send it flow
        # (reduced cost 0, flow that can be sent back). (From every such row at once, the
        # paths are no fewer and each costs more.)
        source = 0
        while source < n and supply_left[source] == 0.0:
            source += 1
        if source == n:
            return _take_flow(cost, flow, holders, held)
        for c in range(m):
            column_distance[c] = cost[source, c] - u[source] - v[c]
            column_from[c] = source
            columns[c] = c
        row_distance[source] = 0.0
        row_from[source] = -1
        reached[0] = source
        reached_in[source] = path
        rows = 1
        scans = 0
        while True:
            # The nearest unscanned column moves to the end of the scanned ones.
            position = -1
            distance = np.inf
            for k in range(scans, m):
                key = column_distance[columns[k]]
                closer = key < distance
                distance = key if closer else distance
                position = k if closer else position
            if position < 0:  # supply left but no demand: rounding beyond the tolerance
                _take_flow(cost, flow, holders, held)
                return np.nan
            nearest = columns[position]
            columns[position] = columns[scans]
            columns[scans] = nearest
            scans += 1
            if demand_left[nearest] > 0.0:
                break
            for k in range(held[nearest]):
                r = holders[nearest, k]
                if reached_in[r] != path:
                    reached_in[r] = path
                    reached[rows] = r
                    rows += 1
                    row_distance[r] = distance
                    row_from[r] = nearest
                    _relax(cost, u, v, r, distance, columns, scans, column_distance, column_from)
        # New potentials: the nodes closer than the sink move by how much closer they are.
        for k in range(scans):
            c = columns[k]
            v[c] -= distance - column_distance[c]
        for k in range(rows):
            r = reached[k]
            u[r] += distance - row_distance[r]
        _augment(nearest, m, flow, supply_left, demand_left, column_from, row_from, holders, held)
    _take_flow(cost, flow, holders, held)
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
    holders: np.ndarray,
    held: np.ndarray,
) -> None:
    """As much flow as fits on the cells of zero reduced cost, row by row (the flow the
    Hungarian algorithm starts from)."""
    n, m = cost.shape
    for r in range(n):
        for c in range(m):
            if supply_left[r] == 0.0:
                break
            if cost[r, c] - u[r] - v[c] <= TIGHT and demand_left[c] > 0.0:
                moved = min(supply_left[r], demand_left[c])
                flow[r * m + c] = moved
                holders[c, held[c]] = r
                held[c] += 1
                supply_left[r] = _clear(supply_left[r] - moved)
                demand_left[c] = _clear(demand_left[c] - moved)


@njit(cache=True, nogil=True, fastmath={"nsz", "contract"}, inline="always")
def _relax(
    cost: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    row: int,
    distance: float,
    columns: np.ndarray,
    scanned: int,
    column_distance: np.ndarray,
    column_from: np.ndarray,
) -> None:
    """Dijkstra's update from a row reached at `distance` to the unscanned columns
    (`columns[scanned:]`), written with selects rather than branches: which column gets
    closer is unpredictable."""
    base = distance - u[row]
    for k in range(scanned, cost.shape[1]):
        c = columns[k]
        through = base + cost[row, c] - v[c]
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
    holders: np.ndarray,
    held: np.ndarray,
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
        if flow[r * m + c] == 0.0:
            holders[c, held[c]] = r
            held[c] += 1
        flow[r * m + c] += moved
        if row_from[r] < 0:
            supply_left[r] = _clear(supply_left[r] - moved)
            return
        c = row_from[r]
        flow[r * m + c] = _clear(flow[r * m + c] - moved)
        if flow[r * m + c] == 0.0:
            _drop_holder(holders, held, c, r)


@njit(cache=True, nogil=True, inline="always")
def _drop_holder(holders: np.ndarray, held: np.ndarray, column: int, row: int) -> None:
    """Row `row` no longer sends flow to `column`."""
    for k in range(held[column]):
        if holders[column, k] == row:
            held[column] -= 1
            holders[column, k] = holders[column, held[column]]
            return


@njit(cache=True, nogil=True, inline="always")
def _clear(amount: float) -> float:
    """`amount`, or 0 when it is only rounding."""
    return amount if amount > FLOW_TOLERANCE else 0.0


@njit(cache=True, nogil=True, inline="always")
def _take_flow(cost: np.ndarray, flow: np.ndarray, holders: np.ndarray, held: np.ndarray) -> float:
    """The cost of the flow, which goes back to zero for the next problem: only the cells
    that carry flow (the holders lists) are visited, not the whole matrix."""
    m = cost.shape[1]
    total = 0.0
    for c in range(m):
        for k in range(held[c]):
            r = holders[c, k]
            total += flow[r * m + c] * cost[r, c]
            flow[r * m + c] = 0.0
    return total
