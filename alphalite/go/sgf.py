"""SGF records in and out, through sgfmill only.

``read_sgf(data) -> GameRecord`` turns the bytes of one record into plain
values: size, komi, handicap, rules, players, result, the setup stones
before the first move and the main-line moves as ``(colour, flat move)`` (colour +1 black, -1 white;
flat move ``row*size+col``, pass ``size*size``, converted by ``coords``).
``replay(record)`` plays every move through our board and says how many of
them are legal and why the first illegal one is not. ``write_sgf(record)``
writes a record back; ``read_sgf(write_sgf(r)) == r``.

Every failure is an ``SgfError`` with a one-line message.

Conventions, where files disagree:

* **Encoding** (judged on the root's property values, which is all we read
  as text): the first of UTF-8, the declared ``CA``, GB18030, Latin-1 that
  decodes every value strictly. Valid UTF-8 wins over a declared CA because
  a wrong CA (UTF-8 bytes labelled ISO-8859-1) is common and non-ASCII UTF-8
  is almost never meant as anything else; pure ASCII reads the same in all.
  Latin-1 decodes anything, so an encoding never stops a record from
  loading; only names can come out garbled. Moves are ASCII either way.
* **Komi** (``parse_komi``). Real komi is below 100 points. Some Chinese
  servers write hundredths: ``KM[650]`` is 6.5 points, and quarter values
  are in stones, ``KM[375]`` = 3.75 stones = 7.5 points. Rule: a value of
  100 or more is divided by 100; if the result ends in .25 or .75 it is a
  stone count and is doubled. A komi that is not a number reads as 0.0.
* **Handicap.** ``HA[n]`` with AB before the first move: the AB stones are
  the handicap. ``HA[n]`` (n >= 2) without AB: the GTP ``fixed_handicap``
  stones are placed, unless the record's first n moves are all Black's (it
  plays its handicap stones as moves). ``HA`` of 0 or 1 places nothing.
* **Collections.** A file may hold several games: ``read_sgf`` reads the
  first, ``read_sgf_collection`` all of them.
* **Board size.** ``SZ[n]`` or ``SZ[n:n]``; other rectangles are refused.
* **Passes.** ``B[]`` always, ``B[tt]`` on boards up to 19x19 (sgfmill).
* **Results** (``parse_result``; ``result_string`` writes a score): ``B+R``/``B+Resign``, ``W+T``/``Time``,
  ``B+F``/``Forfeit``, ``W+3.5``, ``B+`` (winner, no margin), ``0``/
  ``Draw``/``Jigo`` (draw), ``Void``, ``?`` and anything else (unknown).
* **Variations**: the main line (first child of every node) only. Setup
  stones in nodes before the first move are part of the start position;
  setup stones after it end the usable game there (``stop="setup"``).
"""

from __future__ import annotations

import codecs
import dataclasses
import math
import re

import numpy as np

from alphalite.go import board, coords
from alphalite.runtime.kernels import njit

class SgfError(ValueError):
    """A record that cannot be read; the message is one line."""


@dataclasses.dataclass(frozen=True)
class GameRecord:
    """One game as plain values. Moves and setup points are flat indices."""

    size: int
    komi: float  # 0.0 where the record states none (``komi_stated``)
    handicap: int = 0
    rules: str = ""
    black_player: str = ""
    white_player: str = ""
    black_rank: str = ""
    white_rank: str = ""
    date: str = ""
    result: str = ""  # RE as written
    winner: int = 0  # +1 black, -1 white, 0 draw/void/unknown
    margin: float | None = None  # points for scored results, else None
    result_kind: str = "unknown"  # score, resign, time, forfeit, win, draw, void, unknown
    setup_black: tuple[int, ...] = ()  # sorted flat points
    setup_white: tuple[int, ...] = ()
    moves: tuple[tuple[int, int], ...] = ()  # (colour, flat move); pass = size*size
    first_player: int = 0  # PL on the root, 0 if absent
    stop: str = ""  # why the main line stops early ("setup" = setup stones mid-game)
    encoding: str = dataclasses.field(default="UTF-8", compare=False)
    # KM present and a number (GTP's loadsgf keeps the controller's komi otherwise); of the file, like encoding
    komi_stated: bool = dataclasses.field(default=True, compare=False)

    @property
    def num_moves(self) -> int:
        return len(self.moves)


# ------------------------------------------------------------------ values


_RESULT_WORDS = {
    "R": "resign", "RESIGN": "resign", "T": "time", "TIME": "time",
    "F": "forfeit", "FORFEIT": "forfeit",
}


def parse_result(text: str) -> tuple[int, float | None, str]:
    """RE value -> (winner +1/-1/0, margin in points or None, kind)."""
    t = text.strip().upper()
    if t in ("0", "DRAW", "JIGO", "B+0", "W+0"):
        return 0, 0.0, "draw"
    if t == "VOID":
        return 0, None, "void"
    m = re.fullmatch(r"([BW])\s*\+\s*(.*)", t)
    if not m:
        return 0, None, "unknown"
    winner = board.BLACK if m.group(1) == "B" else board.WHITE
    rest = m.group(2).strip()
    if rest == "":
        return winner, None, "win"
    if rest in _RESULT_WORDS:
        return winner, None, _RESULT_WORDS[rest]
    try:
        margin = float(rest)
    except ValueError:
        return winner, None, "win"
    if not math.isfinite(margin):
        return winner, None, "win"
    return winner, margin, "score"


def result_string(score: float) -> str:
    """Black minus white (komi in) -> the RE / ``final_score`` text: ``B+3.5``,
    ``W+0.5`` or ``0``; ``parse_result`` reads it back."""
    if score == 0:
        return "0"
    return f"{'B' if score > 0 else 'W'}+{abs(score):g}"


def parse_komi(text: str) -> float:
    """KM value -> komi in points (see the module docstring for the rule)."""
    k = _komi_number(text)
    if k is None:
        return 0.0
    if abs(k) >= 100:
        k = k / 100.0
        if (abs(k) * 4) % 2 == 1:  # x.25 or x.75: a count in stones
            k *= 2
    return k


def _komi_number(text: str) -> float | None:
    try:
        k = float(text.strip())
    except ValueError:
        return None
    return k if math.isfinite(k) else None


def handicap_points(size: int, handicap: int) -> list[int]:
    """GTP ``fixed_handicap`` stones as flat points (sizes 7..25, 2..9 stones).

    Raises SgfError where GTP allows no such placement."""
    if handicap < 2:
        return []
    if size < 7 or handicap > 9 or (handicap > 4 and (size % 2 == 0 or size == 7)):
        raise SgfError(f"handicap {handicap} has no standard placement on {size}x{size}")
    e = 2 if size <= 12 else 3  # third line on small boards, fourth otherwise
    lo, mid, hi = e, size // 2, size - 1 - e
    # (row, col) with row 0 at the top; GTP order: D4 Q16 D16 Q4 D10 Q10 K4 K16 K10
    bl, tr, tl, br = (hi, lo), (lo, hi), (lo, lo), (hi, hi)
    ml, mr, bm, tm, cc = (mid, lo), (mid, hi), (hi, mid), (lo, mid), (mid, mid)
    table = {
        2: [bl, tr], 3: [bl, tr, tl], 4: [bl, tr, tl, br], 5: [bl, tr, tl, br, cc],
        6: [bl, tr, tl, br, ml, mr], 7: [bl, tr, tl, br, ml, mr, cc],
        8: [bl, tr, tl, br, ml, mr, bm, tm], 9: [bl, tr, tl, br, ml, mr, bm, tm, cc],
    }
    return [coords.to_flat(r, c, size) for r, c in table[handicap]]


def _choose_encoding(values: list[bytes], declared: str | None) -> str:
    """The encoding for the root's text values (see the module docstring)."""
    candidates = ["utf-8"]
    if declared:
        try:
            candidates.append(codecs.lookup(declared).name)
        except LookupError:
            pass
    candidates += ["gb18030", "latin-1"]
    for enc in candidates:
        try:
            for v in values:
                v.decode(enc)
        except (UnicodeDecodeError, LookupError):
            continue
        return enc
    return "latin-1"


def _text(node, ident: str) -> str:
    try:
        return str(node.get(ident)).strip()
    except (KeyError, ValueError):
        return ""


def _raw(node, ident: str) -> str:
    try:
        return node.get_raw(ident).decode("latin-1").strip()
    except KeyError:
        return ""


def _one_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return msg[0] if msg else type(e).__name__


# ------------------------------------------------------------------ reading


def _game_trees(data: bytes) -> list:
    """The coarse game trees of an SGF file (a collection may hold several)."""
    from sgfmill import sgf_grammar

    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SgfError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if b"\x00" in data[:4096]:
        raise SgfError("binary data, not SGF")
    try:
        return sgf_grammar.parse_sgf_collection(data)
    except ValueError as e:
        raise SgfError(f"not a valid SGF record: {_one_line(e)}") from None


def read_sgf(data: bytes) -> GameRecord:
    """Parse one SGF record (bytes; of a collection, its first game) into a
    GameRecord; raises SgfError."""
    return _read_tree(_game_trees(data)[0])


def read_sgf_collection(data: bytes) -> list[GameRecord | SgfError]:
    """Every game of an SGF file, in order: a GameRecord each, or the
    SgfError that game raised. Raises SgfError when the file as a whole
    cannot be parsed."""
    out: list[GameRecord | SgfError] = []
    for tree in _game_trees(data):
        try:
            out.append(_read_tree(tree))
        except SgfError as e:
            out.append(e)
    return out


def _setup_of(node, size: int) -> tuple[set, set, set]:
    try:
        bp, wp, ep = node.get_setup_stones()
        return ({coords.from_sgfmill(p, size) for p in bp}, {coords.from_sgfmill(p, size) for p in wp},
                {coords.from_sgfmill(p, size) for p in ep})
    except (ValueError, coords.CoordError) as e:
        raise SgfError(f"bad setup stones: {_one_line(e)}") from None


def _read_tree(coarse) -> GameRecord:
    from sgfmill import sgf as sgfmill_sgf

    try:
        declared = coarse.sequence[0].get("CA", [None])[0]
        declared = declared.decode("ascii", "replace").strip() if declared else None
        size_raw = coarse.sequence[0].get("SZ", [b"19"])[0]
    except (IndexError, AttributeError):
        raise SgfError("not a valid SGF record: empty game tree") from None
    try:
        sides = [int(x) for x in size_raw.decode("ascii").strip().split(":")]
    except (UnicodeDecodeError, ValueError):
        raise SgfError(f"bad board size SZ[{size_raw.decode('latin-1')}]") from None
    if len(sides) > 2 or len(set(sides)) != 1:
        raise SgfError(f"unsupported board size SZ[{size_raw.decode('latin-1')}]: square boards only")
    size = sides[0]
    if not coords.MIN_SIZE <= size <= coords.MAX_SIZE:
        raise SgfError(f"unsupported board size {size}")
    if len(sides) == 2:  # SZ[19:19], which sgfmill refuses
        coarse.sequence[0]["SZ"] = [str(size).encode()]
    enc = _choose_encoding([v for vals in coarse.sequence[0].values() for v in vals], declared)
    try:
        game = sgfmill_sgf.Sgf_game.from_coarse_game_tree(coarse, override_encoding=enc)
    except ValueError as e:
        raise SgfError(f"not a valid SGF record: {_one_line(e)}") from None
    if game.get_size() != size:
        raise SgfError(f"unsupported board size {game.get_size()}")
    root = game.get_root()

    komi_raw = _raw(root, "KM")
    komi = parse_komi(komi_raw)
    try:
        handicap = int(_raw(root, "HA") or 0)
    except ValueError:
        handicap = 0
    result = _text(root, "RE")
    winner, margin, kind = parse_result(result)

    first = 0
    if root.has_property("PL"):
        first = board.BLACK if _text(root, "PL").lower().startswith("b") else board.WHITE

    black, white = set(), set()
    moves: list[tuple[int, int]] = []
    stop = ""
    try:
        nodes = game.get_main_sequence()
    except ValueError as e:
        raise SgfError(f"bad game tree: {_one_line(e)}") from None
    for i, node in enumerate(nodes):
        if node.has_setup_stones():
            if moves:  # setup stones mid-game: the usable game ends here
                stop = "setup"
                break
            b, w, e = _setup_of(node, size)  # before the first move: part of the start position
            black, white = (black | b) - w - e, ((white - b) | w) - e  # a later node wins; in one node AW
        try:
            colour, point = node.get_move()
        except ValueError:
            raise SgfError(f"bad move in node {i}") from None
        if colour is None:
            continue
        moves.append((board.BLACK if colour == "b" else board.WHITE, coords.from_sgfmill(point, size)))
    if handicap >= 2 and not black and not white and {c for c, _ in moves[:handicap]} != {board.BLACK}:
        # HA without AB: the fixed stones, unless the record plays them as its first black moves
        black = set(handicap_points(size, handicap))

    return GameRecord(
        size=size, komi=float(komi), handicap=max(handicap, 0), rules=_text(root, "RU"),
        black_player=_text(root, "PB"), white_player=_text(root, "PW"),
        black_rank=_text(root, "BR"), white_rank=_text(root, "WR"), date=_text(root, "DT"),
        result=result, winner=winner, margin=margin, result_kind=kind,
        setup_black=tuple(sorted(black)), setup_white=tuple(sorted(white)),
        moves=tuple(moves), first_player=first, stop=stop, encoding=enc,
        komi_stated=_komi_number(komi_raw) is not None,
    )


# ------------------------------------------------------------------ replay


@njit(cache=True, nogil=True)
def replay_moves(size, setup_points, setup_colors, moves, colors, superko, suicide, zob):
    """Play setup then moves on a fresh board.

    Returns (number of legal moves before the first illegal one or the end,
    board reason code of that illegal move, -1 for a setup that leaves a
    group without liberties, or 0). Play stops after the
    second consecutive pass (the game is over); later moves are not counted
    and the reason is board.GAME_OVER.
    """
    B = board.init_board(size, superko, suicide, zob, 2 * moves.shape[0] + 16)
    meta = B.meta
    if setup_points.shape[0] > 0:
        if board.set_up(B, setup_points, setup_colors) != 0:
            return 0, -1  # a setup group without liberties
    for i in range(moves.shape[0]):
        if meta[board.M_PASSES] >= 2:
            return i, board.GAME_OVER
        stone = colors[i]
        board.set_to_play(B, stone)
        why = board.play_flat(B, moves[i], stone)
        if why != board.LEGAL:
            return i, why
    return moves.shape[0], 0


def record_arrays(record: GameRecord):
    """(setup_points int16, setup_colors int8, moves int16, colors int8)."""
    sp = np.array(list(record.setup_black) + list(record.setup_white), np.int16)
    sc = np.array([1] * len(record.setup_black) + [-1] * len(record.setup_white), np.int8)
    mv = np.array([m for _, m in record.moves], np.int16)
    cl = np.array([c for c, _ in record.moves], np.int8)
    return sp, sc, mv, cl


def replay(record: GameRecord, *, superko: bool = True, suicide: bool = False) -> tuple[int, str]:
    """(number of legal moves, reason of the first illegal one or "")."""
    sp, sc, mv, cl = record_arrays(record)
    n, why = replay_moves(record.size, sp, sc, mv, cl, superko, suicide, board.zobrist_table())
    return int(n), reason_name(int(why))


def reason_name(code: int) -> str:
    """replay_moves reason code -> name ("" for none, "bad setup" for -1)."""
    if code == 0:
        return ""
    if code < 0:
        return "bad setup"
    return board.REASONS[code]


# ------------------------------------------------------------------ writing


def write_sgf(record: GameRecord, moves=None) -> bytes:
    """Serialise a record (optionally with other moves) as UTF-8 SGF bytes."""
    from sgfmill import sgf as sgfmill_sgf

    size = record.size
    game = sgfmill_sgf.Sgf_game(size=size)
    root = game.get_root()
    root.set("KM", float(record.komi))
    if record.handicap:
        root.set("HA", int(record.handicap))
    for ident, value in (("RU", record.rules), ("PB", record.black_player), ("PW", record.white_player),
                         ("BR", record.black_rank), ("WR", record.white_rank), ("DT", record.date),
                         ("RE", record.result)):
        if value:
            root.set(ident, value)
    if record.first_player:
        root.set("PL", "b" if record.first_player == board.BLACK else "w")
    if record.setup_black or record.setup_white:
        root.set_setup_stones([coords.to_sgfmill(m, size) for m in record.setup_black],
                              [coords.to_sgfmill(m, size) for m in record.setup_white])
    for colour, m in record.moves if moves is None else moves:
        node = game.extend_main_sequence()
        node.set_move("b" if colour == board.BLACK else "w", coords.to_sgfmill(int(m), size))
    return game.serialise()
