"""The one place that converts between move encodings.

For a board of size ``n`` (2..25):

=============  =========================  ===============================
encoding       example on 19x19           notes
=============  =========================  ===============================
flat           ``row * n + col``; 72      row 0 is the top line; pass is
                                          ``n * n`` (361 on 19x19)
(row, col)     ``(3, 15)``                row 0 top, col 0 left
GTP vertex     ``"Q16"``, ``"pass"``      column letters A..Z skipping I,
                                          row number ``n - row`` (1 at the
                                          bottom); parsing is
                                          case-insensitive
sgfmill point  ``(15, 15)``               sgfmill's (row, col) with row 0
                                          at the *bottom*; pass is None
padded         ``(row+1)*(n+2) + col+1``  internal to board.py kernels
=============  =========================  ===============================
"""

from __future__ import annotations

GTP_COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"  # no I, 25 letters
MIN_SIZE = 2
MAX_SIZE = 25


class CoordError(ValueError):
    """A vertex or move that does not exist on this board."""


def check_size(size: int) -> int:
    if not isinstance(size, int) or not MIN_SIZE <= size <= MAX_SIZE:
        raise CoordError(f"board size must be an integer in {MIN_SIZE}..{MAX_SIZE}, got {size!r}")
    return size


def pass_move(size: int) -> int:
    return size * size


def num_actions(size: int) -> int:
    """Points plus pass."""
    return size * size + 1


def to_flat(row: int, col: int, size: int) -> int:
    if not (0 <= row < size and 0 <= col < size):
        raise CoordError(f"({row}, {col}) is off a {size}x{size} board")
    return row * size + col


def from_flat(move: int, size: int) -> tuple[int, int] | None:
    """(row, col), or None for pass."""
    if move == size * size:
        return None
    if not 0 <= move < size * size:
        raise CoordError(f"move {move} is off a {size}x{size} board")
    return divmod(move, size)


def to_gtp(move: int, size: int) -> str:
    rc = from_flat(move, size)
    if rc is None:
        return "pass"
    row, col = rc
    return f"{GTP_COLUMNS[col]}{size - row}"


def from_gtp(vertex: str, size: int) -> int:
    """Parse a GTP vertex ("D4", "d4", "pass"); raise CoordError if off the board."""
    v = vertex.strip().upper()
    if v == "PASS":
        return size * size
    if len(v) < 2 or v[0] not in GTP_COLUMNS or not v[1:].isdigit():
        raise CoordError(f"invalid vertex {vertex!r}")
    col = GTP_COLUMNS.index(v[0])
    number = int(v[1:])
    if col >= size or not 1 <= number <= size:
        raise CoordError(f"vertex {vertex!r} is off a {size}x{size} board")
    return (size - number) * size + col


def to_sgfmill(move: int, size: int) -> tuple[int, int] | None:
    rc = from_flat(move, size)
    if rc is None:
        return None
    row, col = rc
    return (size - 1 - row, col)


def from_sgfmill(point: tuple[int, int] | None, size: int) -> int:
    if point is None:
        return size * size
    srow, col = point
    if not (0 <= srow < size and 0 <= col < size):
        raise CoordError(f"sgfmill point {point} is off a {size}x{size} board")
    return (size - 1 - srow) * size + col


def to_padded(move: int, size: int) -> int:
    row, col = divmod(move, size)
    return (row + 1) * (size + 2) + col + 1


def from_padded(p: int, size: int) -> int:
    r, c = divmod(p, size + 2)
    return (r - 1) * size + (c - 1)
